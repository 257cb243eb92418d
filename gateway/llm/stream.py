"""Streaming: SSE decoding, accumulation of content and tool-call deltas, and the filter that
decides which streamed text a user may see (no `<think>` blocks, no tool-call markup).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from gateway.llm.errors import LLMBadResponse
from gateway.llm.textcalls import CALL_MARKERS, REASONING_TAGS, STRAY_CLOSERS
from gateway.llm.types import ToolCall, Usage, new_call_id
from gateway.llm.wire import RawReply, arguments_text, reasoning_of, text_of, usage_from_wire

log = logging.getLogger(__name__)

DONE = object()
"""Returned by `SSEDecoder` for the `data: [DONE]` sentinel."""


async def sse_lines(chunks: AsyncIterable[bytes]) -> AsyncIterator[str]:
    """The lines of a streamed body, given as the network delivers it, split on bytes and
    decoded once whole.

    No incremental text decoder and line decoder per chunk (a reply of hundreds of token
    chunks would pay for each), and a UTF-8 sequence split between two network reads is
    never decoded in halves. Lines end in LF or CRLF, or a lone CR (old servers).
    """
    rest = b""
    async for chunk in chunks:
        if rest:
            chunk = rest + chunk
        if b"\r" in chunk:
            # A CR at the very end may be half of a CRLF: keep it for the next read.
            held = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            if held:
                chunk = chunk[:-1]
        else:
            held = False
        lines = chunk.split(b"\n")
        rest = lines.pop() + (b"\r" if held else b"")
        for line in lines:
            yield line.decode("utf-8", "replace")
    if rest.endswith(b"\r"):  # the held CR ended that line
        yield rest[:-1].decode("utf-8", "replace")
    elif rest:
        yield rest.decode("utf-8", "replace")


class SSEDecoder:
    """Turns the lines of a `text/event-stream` body into parsed JSON payloads.

    Each `data:` line is tried on its own first (what every OpenAI-compatible server sends);
    only a line that does not parse waits for the rest of a multi-line event.
    """

    def __init__(self) -> None:
        self._pending: list[str] = []

    def feed_line(self, line: str) -> list[Any]:
        if not line:
            return self._flush()
        if line.startswith(":"):  # comment / keep-alive (OpenRouter sends these)
            return []
        if not line.startswith("data:"):
            return []  # event:, id:, retry: carry nothing we use
        data = line[5:]
        if data.startswith(" "):
            data = data[1:]
        if not self._pending:
            if data.strip() == "[DONE]":
                return [DONE]
            try:
                return [json.loads(data)]
            except ValueError:
                pass
        self._pending.append(data)
        return []

    def close(self) -> list[Any]:
        return self._flush()

    def _flush(self) -> list[Any]:
        if not self._pending:
            return []
        data = "\n".join(self._pending)
        self._pending = []
        if data.strip() == "[DONE]":
            return [DONE]
        try:
            return [json.loads(data)]
        except ValueError:
            raise LLMBadResponse(f"unparsable stream chunk: {data[:120]!r}") from None


class StreamErrorEvent(Exception):
    """The server put an error object into the stream instead of a chunk."""

    def __init__(self, error: Any) -> None:
        message = error.get("message") if isinstance(error, dict) else error
        code = error.get("code") if isinstance(error, dict) else None
        super().__init__(str(message or "error in stream"))
        self.status = code if isinstance(code, int) and 400 <= code < 600 else 500


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    whole: str | None = None  # arguments sent as an object replace the pieces


class StreamAccumulator:
    """Builds one reply from chunk deltas; `feed` returns the content text of the chunk."""

    def __init__(self) -> None:
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._calls: list[_PartialCall] = []
        self._by_index: dict[int, int] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.done = False
        self.reasoning_delta = ""  # reasoning in the chunk `feed` read last

    @property
    def complete(self) -> bool:
        """Saw `[DONE]` or a finish reason; anything less is a stream cut short."""
        return self.done or self.finish_reason is not None

    def feed(self, chunk: Any) -> str:
        self.reasoning_delta = ""
        if chunk is DONE:
            self.done = True
            return ""
        if not isinstance(chunk, dict):
            raise LLMBadResponse("stream chunk is not a JSON object")
        if chunk.get("error"):
            raise StreamErrorEvent(chunk["error"])
        if isinstance(chunk.get("usage"), dict):
            self.usage = usage_from_wire(chunk["usage"])
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return ""
        text = ""
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index", 0) not in (0, None):
                continue
            delta = _dict(choice.get("delta")) or _dict(choice.get("message"))
            text = text_of(delta.get("content")) or ""
            if text:
                self._content.append(text)
            reasoning = reasoning_of(delta)
            if reasoning:
                self._reasoning.append(reasoning)
                self.reasoning_delta += reasoning
            tool_calls = delta.get("tool_calls")
            for raw in tool_calls if isinstance(tool_calls, list) else ():
                if isinstance(raw, dict):
                    self._tool_delta(raw)
            if isinstance(delta.get("function_call"), dict):  # legacy single call
                self._tool_delta({"index": 0, "function": delta["function_call"]})
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self.finish_reason = finish
        return text

    def _tool_delta(self, raw: dict[str, Any]) -> None:
        function = raw.get("function")
        source = function if isinstance(function, dict) else raw
        name = _str(source.get("name"))
        call_id = _str(raw.get("id"))
        index = raw.get("index")
        call = self._slot(index if isinstance(index, int) else None, call_id, name)
        if call_id and not call.id:
            call.id = call_id
        if name and not call.name:
            call.name = name
        arguments = source.get("arguments")
        if isinstance(arguments, str):
            call.pieces.append(arguments)
        elif arguments is not None:
            call.whole = arguments_text(arguments)

    def _slot(self, index: int | None, call_id: str, name: str) -> _PartialCall:
        """The call a delta belongs to; servers disagree on index and id, so check both."""
        if index is not None:
            slot = self._by_index.get(index)
            if slot is not None:
                existing = self._calls[slot]
                # Some servers number every parallel call 0; a new id means a new call.
                if not (call_id and existing.id and call_id != existing.id):
                    return existing
            return self._new(index)
        if call_id:
            for call in self._calls:
                if call.id == call_id:
                    return call
            return self._new(None)
        if self._calls:
            last = self._calls[-1]
            # No index and no id: a fresh name after finished arguments starts a new call.
            if not (name and last.name and (last.pieces or last.whole)):
                return last
        return self._new(None)

    def _new(self, index: int | None) -> _PartialCall:
        call = _PartialCall()
        self._calls.append(call)
        if index is not None:
            self._by_index[index] = len(self._calls) - 1
        return call

    def result(self) -> RawReply:
        calls: list[ToolCall] = []
        for partial in self._calls:
            if not partial.name:
                log.warning("llm streamed tool call without a name dropped")
                continue
            arguments = partial.whole if partial.whole is not None else "".join(partial.pieces)
            calls.append(ToolCall(partial.id or new_call_id(), partial.name, arguments or "{}"))
        return RawReply(
            content="".join(self._content) or None,
            reasoning="".join(self._reasoning) or None,
            tool_calls=tuple(calls),
            finish_reason=self.finish_reason,
            usage=self.usage,
        )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


# The parser's own tables, so streaming hides exactly the formats parsing understands.
_THINK_OPEN = REASONING_TAGS
_THINK_STRAY = STRAY_CLOSERS


class VisibleText:
    """Decides which streamed content reaches the user as it arrives.

    `<think>` blocks are never shown. With `hide_calls`, everything from the first tool-call
    marker on is held back, as is a reply that opens with `{` or `[` (bare JSON or pythonic
    calls); `flush` releases what turns out to be plain text once the reply is complete.
    A reply that starts mid-thought (a lone `</think>`) cannot be recognised in time; only
    the tag itself is dropped.
    """

    def __init__(self, *, hide_calls: bool) -> None:
        self._hide_calls = hide_calls
        markers = [*_THINK_OPEN, *_THINK_STRAY, *(CALL_MARKERS if hide_calls else ())]
        self._partial = marker_prefixes(tuple(markers))
        self._pattern = _marker_pattern(tuple(markers))
        self._pending = ""
        self._closing: str | None = None  # inside a think block: the tag that ends it
        self._holding = False
        self._started = False  # no visible text yet
        self._shown: list[str] = []
        self._thoughts: list[str] = []  # `<think>` text passed over, for `take_thoughts`

    def feed(self, delta: str) -> str:
        if self._holding:
            return ""
        self._pending += delta
        out: list[str] = []
        while self._pending and not self._holding:
            if self._closing is not None:
                end = self._pending.find(self._closing)
                if end < 0:
                    keep = len(self._closing) - 1
                    self._thoughts.append(self._pending[:-keep] if keep else self._pending)
                    self._pending = self._pending[-keep:] if keep else ""
                    break
                self._thoughts.append(self._pending[:end])
                self._pending = self._pending[end + len(self._closing) :]
                self._closing = None
                continue
            if not self._started:
                # Leading whitespace is dropped (the final content is stripped too), and a
                # reply whose first visible character opens JSON or a list may be a call.
                self._pending = self._pending.lstrip()
                if not self._pending:
                    break
                if self._hide_calls and self._pending[0] in "{[":
                    self._holding = True
                    break
            match = self._pattern.search(self._pending)
            if match is None:
                cut = len(self._pending) - self._partial_marker_len()
                self._show(out, self._pending[:cut])
                self._pending = self._pending[cut:]
                break
            self._show(out, self._pending[: match.start()])
            self._pending = self._pending[match.end() :]
            tag = match.group()
            if tag in _THINK_OPEN:
                self._closing = _THINK_OPEN[tag]
            elif tag not in _THINK_STRAY:
                self._holding = True
        text = "".join(out)
        if text:
            self._shown.append(text)
        return text

    def take_thoughts(self) -> str:
        """The `<think>` text passed over since the last call (it is never in `feed`'s output)."""
        thoughts = "".join(self._thoughts)
        self._thoughts.clear()
        return thoughts

    def _show(self, out: list[str], text: str) -> None:
        if text:
            out.append(text)
            self._started = self._started or not text.isspace()

    def flush(self, final_content: str | None) -> str:
        """What is still owed once the final content is known ("" if nothing or unsure)."""
        shown = "".join(self._shown).lstrip()  # final content is stripped; trailing space counts
        final = final_content or ""
        if not final.startswith(shown):
            return ""
        rest = final[len(shown) :]
        if rest:
            self._shown.append(rest)
        return rest

    def _partial_marker_len(self) -> int:
        """Length of the longest tail of pending text that could begin a marker."""
        return self._partial.tail(self._pending)


class MarkerPrefixes:
    """Which end of a streamed text could be the start of a marker, so it is held back until
    the next delta decides. Every proper prefix is in one set: a check is a few lookups,
    not a scan of every marker for every length (it runs on each delta)."""

    def __init__(self, markers: tuple[str, ...]) -> None:
        self._prefixes = frozenset(m[:size] for m in markers for size in range(1, len(m)))
        self._longest = max((len(p) for p in self._prefixes), default=0)

    def tail(self, text: str) -> int:
        """Length of the longest end of `text` that is the start of a marker (0: none)."""
        for size in range(min(len(text), self._longest), 0, -1):
            if text[-size:] in self._prefixes:
                return size
        return 0


@functools.lru_cache(maxsize=4)
def _marker_pattern(markers: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(m) for m in markers))


@functools.lru_cache(maxsize=16)
def marker_prefixes(markers: tuple[str, ...]) -> MarkerPrefixes:
    return MarkerPrefixes(markers)
