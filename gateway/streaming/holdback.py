"""Holds back streamed text that may be a tool call written as text, until it is known not to be.

With text tool calls (`llm.tool_call_format` text or auto) a model writes its calls into the
reply: `<tool_call>` blocks, `[TOOL_CALLS]`, `<|python_tag|>`, bare JSON, or a fenced block
holding only a call. None of that may flash into the chat while the reply streams. Explicit
markup and a reply that opens with JSON are held to the end of the completion (the final
message decides); a fence that could hold a call is held until it closes and then given to
the parser (`gateway.llm.textcalls.parse`), which says whether it was one.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from gateway.llm.stream import marker_prefixes
from gateway.llm.textcalls import CALL_MARKERS, parse

# Markup that only ever opens a call (a mention in inline code, `<tool_call>`, is not one).
MARKERS = CALL_MARKERS
FENCE = "```"
_WATCHED = (*MARKERS, FENCE)
_FIND = re.compile("|".join(re.escape(m) for m in _WATCHED))

# Fence languages the parser may read as a call (as textcalls.markup._fence does).
_JSON_LANGS = frozenset(
    {"", "json", "json5", "jsonc", "xml", "tool_call", "tool_calls", "function_call"}
    | {"function_calls"}
)
_CODE_LANGS = frozenset({"tool_code", "python", "py"})
_PYTHONIC = re.compile(r"\[?\s*([A-Za-z_][\w.]*)\s*\(")


class CallHoldback:
    """Filters one completion's visible text; `reset` before the next completion."""

    def __init__(self, names: Collection[str] | None = None) -> None:
        self._names = frozenset(names) if names is not None else None
        self.reset()

    def reset(self) -> None:
        self._pending = ""
        self._started = False  # the first visible character has been seen
        self._held = False  # everything to the end of the completion is held back
        self._in_text_fence = False  # inside a fence already known to be plain code
        self._last = ""  # the last character shown

    def feed(self, delta: str) -> str:
        """The part of the text so far that is now known to be shown as written."""
        if self._held:
            return ""
        self._pending += delta
        out: list[str] = []
        while self._pending and not self._held:
            if not self._started:
                first = self._pending.lstrip()
                if not first:
                    break
                if first[0] in "{[":
                    self._held = True  # bare JSON or a pythonic list may be the whole call
                    break
                self._started = True
            if self._in_text_fence:
                if not self._through_fence_end(out):
                    break
                continue
            match = _FIND.search(self._pending)
            if match is None:
                keep = _partial_tail(self._pending)
                out.append(self._pending[: len(self._pending) - keep])
                self._pending = self._pending[len(self._pending) - keep :]
                break
            start = match.start()
            before = self._pending[:start]
            out.append(before)
            self._pending = self._pending[start:]
            if match.group() != FENCE:
                if (before or self._last).endswith("`"):
                    # `<tool_call>` in inline code is talked about, not used.
                    out.append(match.group())
                    self._pending = self._pending[len(match.group()) :]
                    continue
                self._held = True
                self._pending = ""
                break
            if not self._fence(out):
                break
        shown = "".join(out)
        if shown:
            self._last = shown[-1]
        return shown

    # -- fences ------------------------------------------------------------------------

    def _fence(self, out: list[str]) -> bool:
        """Decide the fence at the start of pending; False when more text is needed."""
        text = self._pending
        newline = text.find("\n")
        if newline < 0:
            return False
        lang = text[len(FENCE) : newline].strip().lower()
        body = text[newline + 1 :].lstrip()
        could_be_call = self._could_be_call(lang, body)
        if could_be_call is None:
            return False
        if not could_be_call:
            out.append(text[: newline + 1])
            self._pending = text[newline + 1 :]
            self._in_text_fence = True
            return True
        close = text.find(FENCE, newline + 1)
        if close < 0:
            return False  # held until the fence closes
        end = close + len(FENCE)
        block = text[:end]
        if not parse(block, names=self._names).calls:
            out.append(block)
        self._pending = text[end:]
        return True

    def _could_be_call(self, lang: str, body: str) -> bool | None:
        """Whether a fence with this language and start may hold a call (None: not known yet)."""
        if not body:
            return None
        for marker in MARKERS:
            if body.startswith(marker):
                return True  # the parser reads a fence opening with call markup as a call
            if marker.startswith(body):
                return None  # could still become that markup
        if lang in _JSON_LANGS:
            return body[0] in "{["
        if lang in _CODE_LANGS:
            line = body.split("\n", 1)[0]
            if "\n" not in body and "(" not in line:
                return None
            call = _PYTHONIC.match(line)
            if call is None:
                return False
            return lang == "tool_code" or self._names is None or call.group(1) in self._names
        return False

    def _through_fence_end(self, out: list[str]) -> bool:
        """Inside plain code: show up to and including its closing fence."""
        close = self._pending.find(FENCE)
        if close < 0:
            keep = _partial_tail(self._pending, (FENCE,))
            out.append(self._pending[: len(self._pending) - keep])
            self._pending = self._pending[len(self._pending) - keep :]
            return False
        end = close + len(FENCE)
        out.append(self._pending[:end])
        self._pending = self._pending[end:]
        self._in_text_fence = False
        return True


def _partial_tail(text: str, watched: tuple[str, ...] = _WATCHED) -> int:
    """Length of the longest end of `text` that could be the start of a watched marker."""
    return marker_prefixes(watched).tail(text)
