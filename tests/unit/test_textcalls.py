"""Text tool-call parsing across model dialects, lenient JSON, reasoning and false positives."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.llm.textcalls import ParsedCall, _parse, loads_lenient, parse, split_reasoning

Calls = list[tuple[str, dict[str, Any]]]
W = {"city": "Paris"}

# (id, model output, expected content, expected calls, expected reasoning)
CASES: list[tuple[str, str, str | None, Calls, str | None]] = [
    # --- Hermes / Qwen <tool_call>
    (
        "hermes-one",
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "hermes-text-before",
        'Let me look.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}'
        "</tool_call>",
        "Let me look.",
        [("get_weather", W)],
        None,
    ),
    (
        "hermes-two",
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>',
        None,
        [("a", {}), ("b", {"x": 1})],
        None,
    ),
    (
        "hermes-unclosed-at-end",
        'On it.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
        "On it.",
        [("get_weather", W)],
        None,
    ),
    (
        "hermes-arguments-as-string",
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "hermes-list-inside",
        '<tool_call>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]</tool_call>',
        None,
        [("a", {}), ("b", {})],
        None,
    ),
    (
        "hermes-two-objects-one-block",
        '<tool_call>\n{"name": "a", "arguments": {}}\n{"name": "b", "arguments": {"k": "v"}}\n'
        "</tool_call>",
        None,
        [("a", {}), ("b", {"k": "v"})],
        None,
    ),
    (
        "hermes-openai-shape",
        '<tool_call>{"type": "function", "function": {"name": "get_weather", '
        '"arguments": "{\\"city\\": \\"Paris\\"}"}}</tool_call>',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "hermes-text-after",
        '<tool_call>{"name": "a", "arguments": {}}</tool_call>\nI will report back.',
        "I will report back.",
        [("a", {})],
        None,
    ),
    (
        "qwen3-coder-parameters",
        "<tool_call>\n<function=search>\n<parameter=query>\nbest pizza\n</parameter>\n"
        "<parameter=limit>\n5\n</parameter>\n</function>\n</tool_call>",
        None,
        [("search", {"query": "best pizza", "limit": 5})],
        None,
    ),
    # --- Mistral
    (
        "mistral-list",
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "mistral-list-parallel",
        '[TOOL_CALLS] [{"name": "a", "arguments": {"n": 1}}, {"name": "b", "arguments": {}}]',
        None,
        [("a", {"n": 1}), ("b", {})],
        None,
    ),
    (
        "mistral-name-args",
        '[TOOL_CALLS]get_weather{"city": "Paris"}',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "mistral-args-token",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "mistral-call-id",
        '[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "mistral-repeated-marker",
        '[TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[ARGS]{}',
        None,
        [("a", {"x": 1}), ("b", {})],
        None,
    ),
    # --- Llama 3 bare JSON
    (
        "llama-parameters",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "llama-arguments-key",
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "llama-semicolons",
        '{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {}}',
        None,
        [("a", {"x": 1}), ("b", {})],
        None,
    ),
    (
        "llama-python-tag",
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "llama-builtin-pythonic",
        '<|python_tag|>brave_search.call(query="weather in Paris")<|eom_id|>',
        None,
        [("brave_search", {"query": "weather in Paris"})],
        None,
    ),
    (
        "llama-json-list",
        '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"y": [1, 2]}}]',
        None,
        [("a", {}), ("b", {"y": [1, 2]})],
        None,
    ),
    # --- pythonic
    (
        "pythonic-one",
        '[get_weather(city="Paris")]',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "pythonic-several-literals",
        '[get_weather(city="Paris", days=3), set_flag(on=True, note=None, tags=["a", "b"]), now()]',
        None,
        [
            ("get_weather", {"city": "Paris", "days": 3}),
            ("set_flag", {"on": True, "note": None, "tags": ["a", "b"]}),
            ("now", {}),
        ],
        None,
    ),
    (
        "pythonic-json-literals-and-negative",
        "[move(dx=-2.5, fast=true, target=null, opts={'a': 1})]",
        None,
        [("move", {"dx": -2.5, "fast": True, "target": None, "opts": {"a": 1}})],
        None,
    ),
    (
        "pythonic-python-start-wrapper",
        '<|python_start|>[get_weather(city="Paris")]<|python_end|>',
        None,
        [("get_weather", W)],
        None,
    ),
    # --- Gemma / FunctionGemma
    (
        "gemma-call-token-quotes",
        '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "gemma-pipe-tags-json",
        '<|tool_call|>{"name": "get_weather", "arguments": {"city": "Paris"}}<|/tool_call|>',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "gemma-pipe-tags-call-prefix",
        '<|tool_call|>call:get_weather{"city": "Paris"}<|/tool_call|>',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "functiongemma-escape",
        "<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:2}"
        "<end_function_call>",
        None,
        [("get_weather", {"city": "Paris", "days": 2})],
        None,
    ),
    # --- fenced blocks
    (
        "fence-json-object",
        'Calling it:\n```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
        "Calling it:",
        [("get_weather", W)],
        None,
    ),
    (
        "fence-json-list",
        '```json\n[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]\n```',
        None,
        [("a", {}), ("b", {})],
        None,
    ),
    (
        "fence-tool-call-single-quotes",
        "```tool_call\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n```",
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "fence-tool-code-pythonic",
        '```tool_code\nget_weather(city="Paris")\n```',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "fence-around-tag",
        '```xml\n<tool_call>{"name": "a", "arguments": {}}</tool_call>\n```',
        None,
        [("a", {})],
        None,
    ),
    # --- <function=name>
    (
        "function-tag",
        '<function=get_weather>{"city": "Paris"}</function>',
        None,
        [("get_weather", W)],
        None,
    ),
    (
        "function-tag-two-with-text",
        'Sure.\n<function=a>{"x": 1}</function>\n<function=b>{}</function>',
        "Sure.",
        [("a", {"x": 1}), ("b", {})],
        None,
    ),
    # --- lenient JSON
    (
        "lenient-unquoted-keys-single-quotes-trailing-commas",
        "<tool_call>{name: 'get_weather', arguments: {city: 'Paris', days: [1, 2,],},}</tool_call>",
        None,
        [("get_weather", {"city": "Paris", "days": [1, 2]})],
        None,
    ),
    (
        "lenient-python-literals",
        '<tool_call>{"name": "f", "arguments": {"a": True, "b": False, "c": None}}</tool_call>',
        None,
        [("f", {"a": True, "b": False, "c": None})],
        None,
    ),
    (
        "lenient-raw-newline-and-windows-path",
        '<tool_call>{"name": "write", "arguments": {"path": "C:\\Users\\ana", "text": "a\nb"}}'
        "</tool_call>",
        None,
        [("write", {"path": "C:\\Users\\ana", "text": "a\nb"})],
        None,
    ),
    (
        "lenient-missing-commas",
        '<tool_call>{"name": "f" "arguments": {"a": 1 "b": 2}}</tool_call>',
        None,
        [("f", {"a": 1, "b": 2})],
        None,
    ),
    (
        "lenient-inline-arguments",
        '<tool_call>{"name": "get_weather", "city": "Paris"}</tool_call>',
        None,
        [("get_weather", W)],
        None,
    ),
    # --- reasoning
    (
        "think-closed",
        "<think>The user wants weather.</think>\nIt is sunny.",
        "It is sunny.",
        [],
        "The user wants weather.",
    ),
    (
        "think-then-call",
        '<think>Need the tool.</think>\n<tool_call>{"name": "get_weather", '
        '"arguments": {"city": "Paris"}}</tool_call>',
        None,
        [("get_weather", W)],
        "Need the tool.",
    ),
    (
        "think-unclosed-with-call-inside",
        '<think>Maybe <tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
        None,
        [],
        'Maybe <tool_call>{"name": "get_weather", "arguments": {}}</tool_call>',
    ),
    (
        "think-mid-thought-start",
        "so the answer is 4.</think>\n\nThe answer is 4.",
        "The answer is 4.",
        [],
        "so the answer is 4.",
    ),
    (
        "think-two-blocks",
        "<think>one</think>A<think>two</think>B",
        "AB",
        [],
        "one\n\ntwo",
    ),
    (
        "thinking-tag",
        "<thinking>hmm</thinking>Done.",
        "Done.",
        [],
        "hmm",
    ),
    # --- false positives: these stay content
    (
        "mention-tag",
        "Use the <tool_call> tag like this to call a tool.",
        "Use the <tool_call> tag like this to call a tool.",
        [],
        None,
    ),
    (
        "mention-tag-in-backticks",
        'Write `<tool_call>{"name": "x", "arguments": {}}` in your prompt.',
        'Write `<tool_call>{"name": "x", "arguments": {}}` in your prompt.',
        [],
        None,
    ),
    (
        "json-example-no-name",
        'Here is an example: {"a": 1}',
        'Here is an example: {"a": 1}',
        [],
        None,
    ),
    ("bare-json-no-name", '{"a": 1}', '{"a": 1}', [], None),
    (
        "bare-json-person",
        '{"name": "Ana", "age": 31}',
        '{"name": "Ana", "age": 31}',
        [],
        None,
    ),
    (
        "fence-json-not-a-call",
        '```json\n{"name": "Ana", "age": 31}\n```',
        '```json\n{"name": "Ana", "age": 31}\n```',
        [],
        None,
    ),
    (
        "fence-python-code",
        "```python\nprint(f(x=1))\n```",
        "```python\nprint(f(x=1))\n```",
        [],
        None,
    ),
    (
        "tag-with-broken-json",
        '<tool_call>{"name": "f", "arguments": {"a": </tool_call>',
        '<tool_call>{"name": "f", "arguments": {"a": </tool_call>',
        [],
        None,
    ),
    (
        "markdown-link-list",
        "[docs](https://example.com) explain it.",
        "[docs](https://example.com) explain it.",
        [],
        None,
    ),
    (
        "pythonic-positional-args",
        "[f(1, 2)]",
        "[f(1, 2)]",
        [],
        None,
    ),
    (
        "pythonic-no-eval",
        "[f(a=__import__('os').system('echo hi'))]",
        "[f(a=__import__('os').system('echo hi'))]",
        [],
        None,
    ),
    (
        "function-tag-mention",
        "The <function=name> syntax is used by Llama.",
        "The <function=name> syntax is used by Llama.",
        [],
        None,
    ),
    ("plain", "Hello there!", "Hello there!", [], None),
    ("empty", "   ", None, [], None),
]


@pytest.mark.parametrize(
    ("text", "content", "calls", "reasoning"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_parse(text: str, content: str | None, calls: Calls, reasoning: str | None) -> None:
    reply = parse(text)
    assert reply.content == content
    assert [(c.name, c.arguments) for c in reply.calls] == calls
    assert reply.reasoning == reasoning


def test_table_is_broad() -> None:
    assert len(CASES) >= 40
    assert len({case[0] for case in CASES}) == len(CASES)


def test_names_filter_applies_to_ambiguous_formats_only() -> None:
    bare = '{"name": "delete_all", "arguments": {}}'
    assert parse(bare, names=["get_weather"]).calls == []
    assert parse(bare, names=["delete_all"]).calls == [ParsedCall("delete_all", {})]
    tagged = '<tool_call>{"name": "unknown_tool", "arguments": {}}</tool_call>'
    # Explicit markup always counts, so the agent can tell the model the name is wrong.
    assert parse(tagged, names=["get_weather"]).calls == [ParsedCall("unknown_tool", {})]


def test_python_fence_counts_only_for_offered_tools() -> None:
    text = '```python\nget_weather(city="Paris")\n```'
    assert parse(text).calls == []
    assert parse(text, names=["get_weather"]).calls == [ParsedCall("get_weather", W)]


def test_split_reasoning_without_tags_is_identity() -> None:
    assert split_reasoning("just text") == ("just text", None)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("{a: 1, 'b': 'x', c: [1, 2,],}", {"a": 1, "b": "x", "c": [1, 2]}),
        ("[True, False, None, true, null]", [True, False, None, True, None]),
        ('"\\ud83d\\ude00"', "\U0001f600"),
        ('"\\ud83d"', "\ufffd"),
        ("{n: -1.5e3}", {"n": -1500.0}),
    ],
)
def test_loads_lenient(text: str, value: Any) -> None:
    assert loads_lenient(text) == value


@pytest.mark.parametrize("text", ["", "{", "[1, 2", "{a 1}", '"open', "{a: 1} trailing", "[" * 500])
def test_loads_lenient_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        loads_lenient(text)


_MARKUP = st.sampled_from(
    [
        "<tool_call>",
        "</tool_call>",
        "<TOOL_CALL>",
        "<tools>",
        "<response>",
        "<function_call>",
        "<think>",
        "</think>",
        "[THINK]",
        "<|START_THINKING|>",
        "<|channel>thought",
        "<channel|>",
        "[TOOL_CALLS]",
        "[ARGS]",
        "<|tool_call>",
        "<tool_call|>",
        "<|python_tag|>",
        "<|python_start|>",
        "<function=",
        '<function name="f">',
        "</function>",
        '<invoke name="f">',
        '<parameter name="k">',
        '<｜DSML｜parameter name="k" string="true">',
        "</parameter>",
        "<arg_key>",
        "</arg_key><arg_value>",
        "</arg_value>",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁sep｜>",
        "<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
        "<|START_ACTION|>",
        "<|action_start|><|plugin|>",
        "functools[",
        ">>>f\n",
        "\ncall:f{",
        "```",
        "```json\n",
        "```xml\n",
        "```python\n",
        '{"name": "f", "arguments": {',
        '{"name": "f", "parameters": "',
        '{"tool_calls": [',
        "}",
        "]",
        "[f(a=",
        ")",
        "<parameter=x>",
        "call:",
        '<|"|>',
        "\\u",
        "\\ud83d",
        "`",
        "'",
        '"',
        ";",
        "\n",
        "For example, ",
    ]
)


@settings(max_examples=600, deadline=None)
@given(
    st.lists(st.one_of(st.text(max_size=20), _MARKUP), max_size=30).map("".join),
    st.sampled_from([None, ["f"], ["g"]]),
)
def test_parse_never_raises(text: str, names: list[str] | None) -> None:
    # The private entry point: parse() has a safety net that would hide a parser bug.
    reply = _parse(text, names)
    assert reply.content is None or reply.content == reply.content.strip()
    assert reply.content is None or reply.content
    for call in reply.calls:
        assert call.name and isinstance(call.arguments, dict | str)


@settings(max_examples=200, deadline=None)
@given(st.text(), st.sampled_from([None, ["f"]]))
def test_parse_never_raises_on_any_text(text: str, names: list[str] | None) -> None:
    _parse(text, names)


def test_hostile_text_spends_the_budget_and_stays_content() -> None:
    # A format started tens of thousands of times and never finished: parsing gives up on
    # the rest (kept as text) instead of rereading it, and the call before it still counts.
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    hostile = '<tool_call>{"name": "a", "arguments": {' * 60_000
    reply = _parse(call + "\n" + hostile, ["f"])
    assert reply.calls == [ParsedCall("f", {})]
    assert reply.content == hostile.strip()


def test_scan_reports_how_far_a_failed_read_got() -> None:
    text = '{"a": "' + "x" * 10_000
    with pytest.raises(ValueError) as failure:
        loads_lenient(text)
    assert getattr(failure.value, "pos", 0) == len(text)


def _readme_examples() -> list[str]:
    readme = Path(__file__).resolve().parents[2] / "README.md"
    section = readme.read_text().split("## Text tool calls", 1)[1].split("\n## ", 1)[0]
    examples = []
    for row in section.splitlines():
        if re.match(r"\| \d+ \|", row):
            cell = row.rstrip(" |").rsplit(" | ", 1)[1]
            span = re.fullmatch(r"(`+) ?(.*?) ?\1", cell)
            assert span, row
            examples.append(span.group(2).replace("\\|", "|").replace("\\n", "\n"))
    return examples


def test_every_readme_format_example_parses() -> None:
    examples = _readme_examples()
    assert len(examples) == 18
    names = ["search", "get_time", "brave_search"]
    for example in examples:
        reply = _parse(example, names)
        assert reply.calls, example
        assert reply.calls[0].name in names, example
        assert reply.calls[0].arguments in ({"q": "rust"}, {"query": "rust"}), example
