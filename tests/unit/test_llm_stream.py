"""Streaming pieces on their own: SSE decoding, delta accumulation, the visible-text filter."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gateway.llm.errors import LLMBadResponse
from gateway.llm.stream import DONE, SSEDecoder, StreamAccumulator, VisibleText, sse_lines


def _decode(lines: list[str]) -> list[Any]:
    decoder = SSEDecoder()
    out = [item for line in lines for item in decoder.feed_line(line)]
    return out + decoder.close()


def test_sse_lines_comments_and_done() -> None:
    items = _decode([": keep-alive", 'data: {"a": 1}', "", "event: x", "data:[DONE]", ""])
    assert items == [{"a": 1}, DONE]


def test_sse_multiline_event() -> None:
    assert _decode(['data: {"a":', "data: 1}", ""]) == [{"a": 1}]


def test_sse_unparsable_event() -> None:
    with pytest.raises(LLMBadResponse):
        _decode(["data: {oops", ""])


def _calls(deltas: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    accumulator = StreamAccumulator()
    for delta in deltas:
        accumulator.feed({"choices": [{"index": 0, "delta": {"tool_calls": [delta]}}]})
    return [(c.id, c.name, c.arguments) for c in accumulator.result().tool_calls]


def test_deltas_by_index_interleaved() -> None:
    assert _calls(
        [
            {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}},
            {"index": 1, "id": "b", "function": {"name": "g", "arguments": '{"y"'}},
            {"index": 0, "function": {"arguments": '{"x": 1}'}},
            {"index": 1, "function": {"arguments": ": 2}"}},
        ]
    ) == [("a", "f", '{"x": 1}'), ("b", "g", '{"y": 2}')]


def test_every_call_numbered_zero_but_new_ids() -> None:
    assert _calls(
        [
            {"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}},
            {"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}},
        ]
    ) == [("a", "f", "{}"), ("b", "g", "{}")]


def test_repeated_id_and_name_in_every_chunk() -> None:
    assert _calls(
        [
            {"index": 0, "id": "a", "function": {"name": "f", "arguments": '{"x"'}},
            {"index": 0, "id": "a", "function": {"name": "f", "arguments": ": 1}"}},
        ]
    ) == [("a", "f", '{"x": 1}')]


def test_no_index_no_id_and_object_arguments() -> None:
    calls = _calls(
        [
            {"function": {"name": "f", "arguments": {"x": 1}}},
            {"function": {"name": "g"}},
            {"function": {"arguments": ""}},
        ]
    )
    assert [(name, args) for _, name, args in calls] == [("f", '{"x": 1}'), ("g", "{}")]
    assert all(call_id.startswith("call_") for call_id, _, _ in calls)


def test_usage_reasoning_and_finish() -> None:
    accumulator = StreamAccumulator()
    accumulator.feed({"choices": [{"delta": {"reasoning": "hmm", "content": "Hi"}}]})
    accumulator.feed({"choices": [{"delta": {}, "finish_reason": "stop"}]})
    assert not accumulator.done and accumulator.complete
    accumulator.feed({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}})
    accumulator.feed(DONE)
    reply = accumulator.result()
    assert (reply.content, reply.reasoning, reply.finish_reason) == ("Hi", "hmm", "stop")
    assert reply.usage.total_tokens == 4


def _shown(pieces: list[str], *, hide_calls: bool, final: str | None = None) -> str:
    visible = VisibleText(hide_calls=hide_calls)
    out = "".join(visible.feed(p) for p in pieces)
    return out + (visible.flush(final) if final is not None else "")


def test_think_hidden_even_when_tags_are_split() -> None:
    pieces = ["<thi", "nk>secret", " plan</th", "ink>Hello", " <", "b>world"]
    assert _shown(pieces, hide_calls=False) == "Hello <b>world"


def test_call_markup_held_back() -> None:
    pieces = ["Let me check. <tool", '_call>{"name": "f"', "}</tool_call>"]
    assert _shown(pieces, hide_calls=True) == "Let me check. "
    assert _shown(pieces, hide_calls=False) == "".join(pieces)


def test_leading_json_held_then_released_when_not_a_call() -> None:
    pieces = ['  {"a"', ": 1}"]
    assert _shown(pieces, hide_calls=True) == ""
    assert _shown(pieces, hide_calls=True, final='{"a": 1}') == '{"a": 1}'


def test_flush_releases_a_held_partial_tag() -> None:
    assert _shown(["a <"], hide_calls=True) == "a "
    assert _shown(["a <"], hide_calls=True, final="a <") == "a <"


def test_flush_never_repeats_when_final_text_differs() -> None:
    # Output that began mid-thought: shown text is not a prefix of the final content.
    assert _shown(["thinking</think>Answer"], hide_calls=False, final="Answer") == "thinkingAnswer"


def test_json_after_think_is_still_held() -> None:
    pieces = ["<think>call it</think>\n", '{"name": "f", "parameters": {}}']
    assert _shown(pieces, hide_calls=True) == ""
    assert _shown(["\n\n  Hi", " there"], hide_calls=True) == "Hi there"


def test_new_formats_hidden_while_streaming() -> None:
    # The filter uses the parser's tables: DeepSeek and Kimi tokens, Command R7B reasoning.
    deepseek = ["Checking.<｜tool▁calls", '▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": 1}']
    assert _shown(deepseek, hide_calls=True) == "Checking."
    kimi = ["Ok <|tool_calls_section", "_begin|><|tool_call_begin|>functions.f:0"]
    assert _shown(kimi, hide_calls=True) == "Ok "
    reasoning = ["<|START_THINK", "ING|>plan<|END_THINKING|>Answer"]
    assert _shown(reasoning, hide_calls=False) == "Answer"


def test_marker_prefixes_hold_back_exactly_what_could_start_a_marker() -> None:
    import random

    from gateway.llm.stream import MarkerPrefixes
    from gateway.llm.textcalls import CALL_MARKERS

    markers = (*CALL_MARKERS, "<think>", "```")
    prefixes = MarkerPrefixes(markers)

    def scanned(text: str) -> int:  # every marker, every length: what the set replaces
        for size in range(len(text), 0, -1):
            if any(m.startswith(text[-size:]) and m != text[-size:] for m in markers):
                return size
        return 0

    assert prefixes.tail("hello <tool_") == len("<tool_")
    assert prefixes.tail("hello [TOOL") == len("[TOOL")
    assert prefixes.tail("a ``") == 2
    assert prefixes.tail("plain text.") == 0
    assert prefixes.tail("") == 0
    rng = random.Random(7)
    pieces = [*markers, "a", " ", "<", "[", "`", "|", "x<to", "ol_c"]
    for _ in range(2000):
        text = "".join(rng.choice(pieces)[: rng.randint(1, 12)] for _ in range(rng.randint(0, 5)))
        assert prefixes.tail(text) == scanned(text), text


async def arriving(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def lines_of(chunks: list[bytes]) -> list[str]:
    return [line async for line in sse_lines(arriving(chunks))]


async def test_sse_lines_split_on_bytes_whatever_the_reads() -> None:
    body = 'data: {"a": "é"}\r\n\r\ndata: [DONE]\n\n'.encode()
    expected = ['data: {"a": "é"}', "", "data: [DONE]", ""]
    assert await lines_of([body]) == expected
    cut = body.index(b"\r\n")  # a read ends between CR and LF, another inside "é"
    e_acute = body.index("é".encode()) + 1
    assert await lines_of([body[:e_acute], body[e_acute : cut + 1], body[cut + 1 :]]) == expected
    assert await lines_of([b"data: x\rdata: y\r", b"\rdata: z"]) == [
        "data: x",
        "data: y",
        "",
        "data: z",
    ]


@example("\r\r", [1])
@given(st.text(alphabet="ab\r\né", max_size=40), st.lists(st.integers(0, 60), max_size=6))
def test_sse_lines_do_not_depend_on_where_reads_end(text: str, cuts: list[int]) -> None:
    import asyncio

    body = text.encode()
    points = sorted({min(c, len(body)) for c in cuts})
    pieces = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    whole = asyncio.run(lines_of([body]))
    assert asyncio.run(lines_of(pieces)) == whole
    # CR, LF and CRLF end a line alike; a last line without an ending still counts.
    parts = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert whole == (parts[:-1] if parts[-1] == "" else parts)
