"""Text tool calls, family by family: how `arguments` may be spelled, Mistral / Magistral /
xLAM output, and text that only shows a call. Our own cases, written from reading the parser
tests of vLLM, llama.cpp and sglang, run with and without the offered tool names.
"""

from __future__ import annotations

import pytest

from tests.unit.textcalls_table import GW, SEARCH, Case, Q, W, check, params

# --- `arguments` as an object, a JSON string, a plain string, empty ---------------------------
ARGUMENTS = [
    Case(
        "json-string",
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>',
        None,
        [("get_weather", W)],
    ),
    Case(
        "plain-string",
        '<tool_call>\n{"name": "search", "arguments": "hello"}\n</tool_call>',
        None,
        [("search", "hello")],
    ),
    Case(
        "empty-string",
        '<tool_call>{"name": "get_time", "arguments": ""}</tool_call>',
        None,
        [("get_time", {})],
    ),
    Case(
        "null",
        '<tool_call>{"name": "get_time", "arguments": null}</tool_call>',
        None,
        [("get_time", {})],
    ),
    Case(
        "python-dict-in-string",
        "<tool_call>{'name': 'search', 'arguments': \"{'query': 'rust'}\"}</tool_call>",
        None,
        [("search", Q)],
    ),
    Case(
        "json-string-bare-reply",
        '{"name": "search", "parameters": "{\\"query\\": \\"rust\\"}"}',
        None,
        [("search", Q)],
    ),
    Case(
        "plain-string-bare-reply-stays-text",
        '{"name": "search", "arguments": "hello"}',
        '{"name": "search", "arguments": "hello"}',
        [],
    ),
    Case(
        "list-in-markup",
        '<tool_call>{"name": "search", "arguments": [1, 2]}</tool_call>',
        None,
        [("search", "[1, 2]")],
    ),
    Case(
        "openai-shape-whole-reply",
        '{"type": "function", "function": {"name": "get_weather", '
        '"arguments": "{\\"city\\": \\"Paris\\"}"}}',
        None,
        [("get_weather", W)],
    ),
    Case(
        "mistral-json-string",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}]',
        None,
        [("get_weather", W)],
    ),
    Case(
        "input-key",
        '<tool_call>{"name": "search", "input": {"query": "rust"}}</tool_call>',
        None,
        [("search", Q)],
    ),
    Case(
        "escaped-json-string-with-newline",
        '<tool_call>{"name": "run_shell", '
        '"arguments": "{\\"command\\": \\"ls\\\\n\\"}"}</tool_call>',
        None,
        [("run_shell", {"command": "ls\n"})],
    ),
]

# --- Mistral / Magistral / xLAM --------------------------------------------------------------
MISTRAL = [
    Case(
        "v3-list-with-id",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]',
        None,
        [("get_weather", W)],
    ),
    Case(
        "text-before-marker",
        f"Let me check. [TOOL_CALLS] [{GW}]",
        "Let me check.",
        [("get_weather", W)],
    ),
    Case(
        "glued-to-prose",
        f"I'll check the weather for you.[TOOL_CALLS][{GW}]",
        "I'll check the weather for you.",
        [("get_weather", W)],
    ),
    Case(
        "brackets-inside-strings",
        '[TOOL_CALLS] [{"name": "send_email", "arguments": {"body": "```\\nTable: [City] - '
        '[Temp]\\n```", "to": ""}}]',
        None,
        [("send_email", {"body": "```\nTable: [City] - [Temp]\n```", "to": ""})],
    ),
    Case(
        "v11-args-token",
        '[TOOL_CALLS]search[ARGS]{"query": "rust"}',
        None,
        [("search", Q)],
    ),
    Case(
        "v11-two-calls",
        '[TOOL_CALLS]search[ARGS]{"query": "rust"}[TOOL_CALLS]get_time[ARGS]{}',
        None,
        [("search", Q), ("get_time", {})],
    ),
    Case(
        "v11-call-id",
        '[TOOL_CALLS]search[CALL_ID]abc123XYZ[ARGS]{"query": "rust"}',
        None,
        [("search", Q)],
    ),
    Case(
        "compact-name-object",
        '[TOOL_CALLS]get_weather{"city": "Paris"}',
        None,
        [("get_weather", W)],
    ),
    Case(
        "marker-then-prose-stays-text",
        "[TOOL_CALLS] none needed",
        "[TOOL_CALLS] none needed",
        [],
    ),
    Case(
        "magistral-think",
        "[THINK]Plan the answer.[/THINK]Here it is.",
        "Here it is.",
        [],
        "Plan the answer.",
    ),
    Case(
        "xlam-fence-list-after-prose",
        f"I'll help you with that.\n```json\n[{GW}]\n```",
        "I'll help you with that.",
        [("get_weather", W)],
    ),
    Case(
        "xlam-think-then-list",
        f"<think>Use the tool.</think>[{GW}]",
        None,
        [("get_weather", W)],
        "Use the tool.",
    ),
]

# --- Text that shows a call or holds JSON, and stays content --------------------------------
SHOWN = [
    Case(
        "example-in-a-sentence",
        f"For example, {SEARCH} would run a search.",
        f"For example, {SEARCH} would run a search.",
        [],
    ),
    Case(
        "example-fence",
        f"Here is an example of the format:\n```json\n{SEARCH}\n```",
        f"Here is an example of the format:\n```json\n{SEARCH}\n```",
        [],
    ),
    Case(
        "inline-code",
        f"Send `{SEARCH}` to run it.",
        f"Send `{SEARCH}` to run it.",
        [],
    ),
    Case(
        "inline-code-tag",
        f"Write `<tool_call>{SEARCH}</tool_call>` in the prompt.",
        f"Write `<tool_call>{SEARCH}</tool_call>` in the prompt.",
        [],
    ),
    Case(
        "python-fence-with-call-dict",
        f"```python\ncall = {SEARCH}\n```",
        f"```python\ncall = {SEARCH}\n```",
        [],
    ),
    Case(
        "text-fence-with-tag",
        f"```text\n<tool_call>{SEARCH}</tool_call>\n```",
        f"```text\n<tool_call>{SEARCH}</tool_call>\n```",
        [],
    ),
    Case("person-record", '{"name": "Ana", "age": 31}', '{"name": "Ana", "age": 31}', []),
    Case(
        "record-list",
        '[{"name": "Ana", "arguments": 3}, {"name": "Bo", "arguments": 4}]',
        '[{"name": "Ana", "arguments": 3}, {"name": "Bo", "arguments": 4}]',
        [],
    ),
    Case(
        "json-schema",
        'The schema is {"type": "object", "properties": {"name": {"type": "string"}}}.',
        'The schema is {"type": "object", "properties": {"name": {"type": "string"}}}.',
        [],
    ),
    Case(
        "empty-object-fence-after-think",
        "<think>I'm\nthinking</think>Hello!\n```json\n{}```",
        "Hello!\n```json\n{}```",
        [],
        "I'm\nthinking",
    ),
    Case(
        "call-inside-reasoning-only",
        f"<think><tool_call>{SEARCH}</tool_call>",
        None,
        [],
        f"<tool_call>{SEARCH}</tool_call>",
    ),
    Case("python-repl", ">>> print(1)\n1", ">>> print(1)\n1", []),
    Case(
        "recounting-an-earlier-call",
        f"Earlier I called {SEARCH} and it found nothing.",
        f"Earlier I called {SEARCH} and it found nothing.",
        [],
    ),
    Case(
        "result-is-not-an-example",
        f"Here is the result: {SEARCH}",
        "Here is the result:",
        [("search", Q)],
    ),
]


@pytest.mark.parametrize(("case", "with_names"), params(ARGUMENTS))
def test_arguments_spellings(case: Case, with_names: bool) -> None:
    check(case, with_names)


@pytest.mark.parametrize(("case", "with_names"), params(MISTRAL))
def test_mistral_magistral_xlam(case: Case, with_names: bool) -> None:
    check(case, with_names)


@pytest.mark.parametrize(("case", "with_names"), params(SHOWN))
def test_shown_calls_stay_content(case: Case, with_names: bool) -> None:
    check(case, with_names)
