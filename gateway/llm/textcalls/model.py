"""The values a text-call parse returns, and the per-parse context every reader shares: the
offered tool names and a budget on failed reads that keeps parsing linear in the reply's length.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from gateway.llm.lenient_json import LenientJSONError, scan


@dataclass(frozen=True)
class ParsedCall:
    name: str
    # An object when the model wrote one (or a JSON string holding one). A str is anything
    # else the model put there (a plain string, a list), kept as written: the agent answers
    # the model that the arguments must be an object.
    arguments: dict[str, Any] | str


@dataclass(frozen=True)
class ParsedReply:
    content: str | None  # the text with call markup and reasoning removed; None if empty
    calls: list[ParsedCall] = field(default_factory=list)
    reasoning: str | None = None


Calls = list[ParsedCall]

NAME = re.compile(r"[A-Za-z_][\w.\-:/]{0,127}")
"""A tool name as models write it (dots for namespaces, hyphens, Kimi's `functions.x`)."""

# Reading is paid from a budget proportional to the reply: successful reads pay their length
# (they move the scan past the text, so honest replies spend about 1x), failed attempts pay
# what they read plus a fixed cost. Hostile text that starts a format thousands of times
# without finishing it runs out of budget; the rest of it is then kept as plain text.
_BUDGET_FACTOR = 4
_BUDGET_FLOOR = 2_000_000
_ATTEMPT = 4_000  # ~500 failed attempts on a short reply, ~1,500 on 1 MB


class Context:
    """What one parse knows: the offered tool names, and how much more reading it may do."""

    def __init__(self, names: Collection[str] | None, size: int) -> None:
        self.names = frozenset(names) if names is not None else None
        self._budget = _BUDGET_FACTOR * size + _BUDGET_FLOOR

    @property
    def exhausted(self) -> bool:
        return self._budget <= 0

    def charge(self, chars: int) -> None:
        """Pay for reading `chars` characters outside `read` (pythonic lists, brackets)."""
        self._budget -= chars

    def miss(self) -> None:
        """Pay for an attempt that found nothing (a marker, a candidate) beyond what it read."""
        self._budget -= _ATTEMPT

    def read(self, text: str, pos: int) -> tuple[Any, int] | None:
        """One JSON-ish value at `pos`, or None when there is none or the budget is spent."""
        if self.exhausted:
            return None
        try:
            value, end = scan(text, pos)
        except LenientJSONError as exc:
            self._budget -= exc.pos - pos + _ATTEMPT
            return None
        except RecursionError:  # a nesting too deep for the C decoder's stack
            self._budget -= len(text) - pos + _ATTEMPT
            return None
        self._budget -= end - pos
        return value, end

    def offered(self, calls: Iterable[ParsedCall]) -> bool:
        """Without names everything passes; with names, every call must name an offered tool."""
        return self.names is None or all(call.name in self.names for call in calls)


# --- assembling the visible content -----------------------------------------------------------

CUT = None
"""Marks where calls were taken out of the text, in a list of kept text pieces."""

Pieces = list[str | None]
_SEPARATORS = re.compile(r"[\s;,]*")
_BLANK_LINES = re.compile(r"\n{3,}")


def join_pieces(pieces: Pieces) -> str:
    """The kept text with calls removed: separators between calls go, and the text on both
    sides of a removed call is joined with one space (or the line break it already had)."""
    runs: list[str] = []
    current: list[str] = []
    for piece in pieces:
        if piece is None:
            runs.append("".join(current))
            current = []
        else:
            current.append(piece)
    runs.append("".join(current))
    out: list[str] = []  # non-empty strings only, joined once at the end
    for i, run in enumerate(runs):
        if i:
            if i < len(runs) - 1 and _SEPARATORS.fullmatch(run):
                run = ""
            run = run.lstrip(" \t")
            while out and not (trimmed := out[-1].rstrip(" \t")):
                out.pop()
            if out:
                out[-1] = trimmed
                if run and not trimmed.endswith("\n") and not run.startswith("\n"):
                    out.append(" ")
        if run:
            out.append(run)
    text = "".join(out)
    return _BLANK_LINES.sub("\n\n", text) if len(runs) > 1 else text
