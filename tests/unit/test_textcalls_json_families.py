"""Text tool calls written as JSON, family by family: the cases are our own, written from
reading the parser tests of vLLM, llama.cpp and sglang (Hermes 2 Pro / Qwen and the lenient
wrappers, Llama 3.x, Command R, InternLM, Functionary, generic JSON) and run with and without
the offered tool names.
"""

from __future__ import annotations

import pytest

from tests.unit.textcalls_table import GW, SEARCH, Case, Expect, Q, W, check, params

# --- Hermes 2 Pro / Qwen: <tool_call> and the lenient wrappers llama.cpp accepts ----------------
HERMES = [
    Case("tag-newlines", f"<tool_call>\n{GW}\n</tool_call>", None, [("get_weather", W)]),
    Case(
        "arguments-before-name",
        '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>',
        None,
        [("get_weather", W)],
    ),
    Case(
        "prose-glued-before",
        f"Sure, checking now.<tool_call>{GW}</tool_call>",
        "Sure, checking now.",
        [("get_weather", W)],
    ),
    Case("uppercase-tag", f"<TOOL_CALL>{GW}</TOOL_CALL>", None, [("get_weather", W)]),
    Case("tool-tag", f"<tool>\n  {GW}\n</tool>", None, [("get_weather", W)]),
    Case("tools-tag", f"<tools>\n  {GW}\n</tools>", None, [("get_weather", W)]),
    Case(
        "tool-calls-tag-list",
        f"<tool_calls>[{GW}, {SEARCH}]</tool_calls>",
        None,
        [("get_weather", W), ("search", Q)],
    ),
    Case(
        "tool-calls-tag-one-per-line",
        f"<tool_calls>\n{GW}\n{SEARCH}\n</tool_calls>",
        None,
        [("get_weather", W), ("search", Q)],
    ),
    Case("response-tag", f"<response>\n  {GW}\n</response>", None, [("get_weather", W)]),
    Case("json-tag-uppercase", f"<JSON>\n  {GW}\n</JSON>", None, [("get_weather", W)]),
    Case(
        "xml-tag-object-over-lines",
        '<xml>\n  {\n    "name": "get_weather", "arguments": {"city": "Paris"}\n  }\n</xml>',
        None,
        [("get_weather", W)],
    ),
    Case("function-call-tag", f"<function_call>{GW}</function_call>", None, [("get_weather", W)]),
    Case(
        "function-name-attribute",
        '<function name="get_weather">\n{"city": "Paris"}\n</function>',
        None,
        [("get_weather", W)],
    ),
    Case(
        "function-name-attribute-single-quotes",
        '<function name=\'search\'>{"query": "rust"}</function>',
        None,
        [("search", Q)],
    ),
    Case(
        "fence-xml-around-response-tag",
        f"```xml\n<response>\n    {GW}\n</response>\n```",
        None,
        [("get_weather", W)],
    ),
    Case("fence-xml-bare-json", f"```xml\n  {GW}\n```", None, [("get_weather", W)]),
    Case("fence-no-language", f"```\n{GW}\n```", None, [("get_weather", W)]),
    Case(
        "fence-json-around-function-call-tag",
        f"```json\n\n      <function_call> {GW} \n      </function_call> \n``` ",
        None,
        [("get_weather", W)],
    ),
    Case(
        "call-after-a-line-of-prose",
        f"I will look this up:\n{GW}",
        "I will look this up:",
        [("get_weather", W)],
    ),
    Case(
        "two-blocks-text-between",
        f"<tool_call>{GW}</tool_call>\nand then\n<tool_call>{SEARCH}</tool_call>",
        "and then",
        [("get_weather", W), ("search", Q)],
    ),
    Case(
        "explicit-tag-unknown-name-still-counts",
        '<tool_call>{"name": "launch", "arguments": {}}</tool_call>',
        None,
        [("launch", {})],
    ),
    Case(
        "response-tag-plain-text",
        "<response>Here you go.</response>",
        "<response>Here you go.</response>",
        [],
    ),
    Case(
        "generic-tag-filtered-by-names",
        '<response>{"name": "launch", "arguments": {}}</response>',
        None,
        [("launch", {})],
        named=Expect('<response>{"name": "launch", "arguments": {}}</response>', []),
    ),
    Case(
        "openai-shape-list-in-tag",
        '<tool_call>[{"type": "function", "function": {"name": "search", '
        '"arguments": "{\\"query\\": \\"rust\\"}"}}]</tool_call>',
        None,
        [("search", Q)],
    ),
    Case(
        "qwen-think-forced-open",
        f"Let me think.\n</think>\n<tool_call>\n{GW}\n</tool_call>",
        None,
        [("get_weather", W)],
        "Let me think.",
    ),
    Case(
        "unclosed-call-after-text",
        f"One moment.\n<tool_call>\n{GW}",
        "One moment.",
        [("get_weather", W)],
    ),
    Case(
        "broken-json-stays-text",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}',
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}',
        [],
    ),
]

# --- Llama 3.x JSON calls: bare, in prose, `;`-separated, behind <|python_tag|> ------------------
LLAMA = [
    Case(
        "parameters-whole-reply",
        '{"name": "search", "parameters": {"query": "rust", "limit": 10}}',
        None,
        [("search", {"query": "rust", "limit": 10})],
    ),
    Case(
        "in-prose-both-sides",
        'Here is what I found: {"name": "search", "parameters": {"query": "rust"}} Anything else?',
        "Here is what I found: Anything else?",
        [("search", Q)],
    ),
    Case(
        "semicolons-in-prose",
        'Running both: {"name": "search", "parameters": {"query": "a"}}; '
        '{"name": "get_time", "parameters": {}} Done.',
        "Running both: Done.",
        [("search", {"query": "a"}), ("get_time", {})],
    ),
    Case(
        "semicolons-spaced",
        '{"name": "search", "parameters": {"query": "a"}} ; {"name": "get_time", "parameters": {}}'
        ' ; {"name": "search", "parameters": {"query": "b"}}',
        None,
        [("search", {"query": "a"}), ("get_time", {}), ("search", {"query": "b"})],
    ),
    Case(
        "semicolon-no-space",
        '{"name": "get_time", "parameters": {}};{"name": "search", "parameters": {"query": "a"}}',
        None,
        [("get_time", {}), ("search", {"query": "a"})],
    ),
    Case(
        "newline-separated",
        '{"name": "get_time", "parameters": {}}\n{"name": "search", "parameters": {"query": "a"}}',
        None,
        [("get_time", {}), ("search", {"query": "a"})],
    ),
    Case(
        "brace-in-trailing-text",
        '{"name": "search", "parameters": {"query": "rust"}} I passed {query} along.',
        "I passed {query} along.",
        [("search", Q)],
    ),
    Case(
        "argument-echo-in-trailing-text",
        '{"name": "search", "parameters": {"query": "rust"}} with {"query": "rust"} as input',
        'with {"query": "rust"} as input',
        [("search", Q)],
    ),
    Case(
        "deeply-nested-arguments",
        '{"name": "search", "parameters": {"a": {"b": {"c": {"d": {"e": "deep"}}}}}}',
        None,
        [("search", {"a": {"b": {"c": {"d": {"e": "deep"}}}}})],
    ),
    Case(
        "braces-and-quotes-in-strings",
        '{"name": "search", "parameters": {"query": "a {b} [c]", "note": "he said \\"hi {x}\\""}}',
        None,
        [("search", {"query": "a {b} [c]", "note": 'he said "hi {x}"'})],
    ),
    Case(
        "invalid-json-stays-text",
        '{"name": "search", "parameters": {bad json}',
        '{"name": "search", "parameters": {bad json}',
        [],
    ),
    Case("no-name-stays-text", '{"parameters": {}}', '{"parameters": {}}', []),
    Case("no-arguments-stays-text", '{"name": "search"}', '{"name": "search"}', []),
    Case(
        "broken-then-valid",
        '{"name": "get_weather", "parameters": {{"name": "get_weather", "parameters": {}}',
        '{"name": "get_weather", "parameters": {',
        [("get_weather", {})],
    ),
    Case(
        "trailing-follow-up",
        '{"name": "get_time", "parameters": {}} Some follow-up text',
        "Some follow-up text",
        [("get_time", {})],
    ),
    Case(
        "python-tag-semicolon",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}};'
        '{"name": "get_time", "parameters": {}}',
        None,
        [("get_weather", W), ("get_time", {})],
    ),
    Case(
        "python-tag-repeated",
        '<|python_tag|>{"name": "get_time", "parameters": {}}'
        '<|python_tag|>{"name": "search", "parameters": {"query": "a"}}',
        None,
        [("get_time", {}), ("search", {"query": "a"})],
    ),
    Case(
        "python-tag-after-intro",
        'Some intro. <|python_tag|>{"name": "get_time", "parameters": {}}',
        "Some intro.",
        [("get_time", {})],
    ),
    Case(
        "python-tag-eom",
        '<|python_tag|>{"name": "search", "parameters": {"query": "rust"}}<|eom_id|>',
        None,
        [("search", Q)],
    ),
    Case(
        "builtin-code-interpreter",
        "<|python_tag|>code_interpreter.call(code=\"print('hey')\")",
        None,
        [("code_interpreter", {"code": "print('hey')"})],
    ),
    Case(
        "prose-call-filtered-by-names",
        'Try {"name": "rm_everything", "parameters": {}} now.',
        "Try now.",
        [("rm_everything", {})],
        named=Expect('Try {"name": "rm_everything", "parameters": {}} now.', []),
    ),
    Case(
        "whole-reply-filtered-by-names",
        '{"name": "rm_everything", "parameters": {}}',
        None,
        [("rm_everything", {})],
        named=Expect('{"name": "rm_everything", "parameters": {}}', []),
    ),
    Case(
        "list-after-prose",
        f"I'll check both.\n[{GW}, {SEARCH}]",
        "I'll check both.",
        [("get_weather", W), ("search", Q)],
    ),
    Case(
        "generic-tool-calls-object",
        '{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}, '
        '"id": "123456789"}]}',
        None,
        [("get_weather", W)],
    ),
    Case(
        "generic-tool-call-object",
        f'{{"tool_call": {SEARCH}}}',
        None,
        [("search", Q)],
    ),
    Case(
        "command-r7b-action",
        '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
        '"parameters": {"city": "Paris"}}\n]<|END_ACTION|>',
        None,
        [("get_weather", W)],
    ),
    Case(
        "command-r7b-thinking-and-action",
        "<|START_THINKING|>Weather first.<|END_THINKING|><|START_ACTION|>["
        '{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}, '
        '{"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}]<|END_ACTION|>',
        None,
        [("get_weather", W), ("get_time", {})],
        "Weather first.",
    ),
    Case(
        "command-r7b-response",
        "<|START_THINKING|>Easy.<|END_THINKING|><|START_RESPONSE|>Hello!\nHow are you?"
        "<|END_RESPONSE|>",
        "Hello!\nHow are you?",
        [],
        "Easy.",
    ),
    Case(
        "internlm2-plugin",
        'Let me search.<|action_start|><|plugin|>\n{"name": "search", "parameters": '
        '{"query": "rust"}}<|action_end|>',
        "Let me search.",
        [("search", Q)],
    ),
    Case(
        "firefunction-functools",
        f" functools[{GW}, {SEARCH}]",
        None,
        [("get_weather", W), ("search", Q)],
    ),
    Case(
        "functionary-v32-marker",
        'all\nChecking now.>>>get_weather\n{"city": "Paris"}\n',
        "Checking now.",
        [("get_weather", W)],
    ),
    Case(
        "functionary-v32-first-call-unmarked",
        'get_weather\n{"city": "Paris"}',
        'get_weather\n{"city": "Paris"}',
        [],
        named=Expect(None, [("get_weather", W)]),
    ),
    Case(
        "functionary-v31-function-tag",
        '<function=get_weather>{"city": "Paris"}</function>\n<function=get_time>{}</function>',
        None,
        [("get_weather", W), ("get_time", {})],
    ),
]


@pytest.mark.parametrize(("case", "with_names"), params(HERMES))
def test_hermes_and_lenient_wrappers(case: Case, with_names: bool) -> None:
    check(case, with_names)


@pytest.mark.parametrize(("case", "with_names"), params(LLAMA))
def test_llama3_and_other_json_dialects(case: Case, with_names: bool) -> None:
    check(case, with_names)
