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

# Failed reads may cost this many characters per character of reply, plus a floor. Each
# handler re-reads text at most a few times, so honest replies never come near it.
_BUDGET_FACTOR = 4
_BUDGET_FLOOR = 65_536
_MIN_CHARGE = 16  # also bounds the number of attempts on text full of short false starts


class Context:
    """What one parse knows: the offered tool names, and how much more reading it may do."""

    def __init__(self, names: Collection[str] | None, size: int) -> None:
        self.names = frozenset(names) if names is not None else None
        self._budget = _BUDGET_FACTOR * size + _BUDGET_FLOOR

    @property
    def exhausted(self) -> bool:
        return self._budget <= 0

    def charge(self, chars: int) -> None:
        self._budget -= max(chars, _MIN_CHARGE)

    def read(self, text: str, pos: int) -> tuple[Any, int] | None:
        """One JSON-ish value at `pos`, or None when there is none or the budget is spent."""
        if self.exhausted:
            return None
        try:
            value, end = scan(text, pos)
        except LenientJSONError as exc:
            self.charge(exc.pos - pos)
            return None
        except RecursionError:  # a pathological nesting the C decoder gave up on
            self.charge(len(text) - pos)
            return None
        self.charge(end - pos)
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
        if piece is CUT:
            runs.append("".join(current))
            current = []
        else:
            current.append(piece)
    runs.append("".join(current))
    for i in range(1, len(runs) - 1):
        if _SEPARATORS.fullmatch(runs[i]):
            runs[i] = ""
    text = runs[0]
    for run in runs[1:]:
        text = _glue(text, run)
    return _BLANK_LINES.sub("\n\n", text) if len(runs) > 1 else text


def _glue(left: str, right: str) -> str:
    left = left.rstrip(" \t")
    right = right.lstrip(" \t")
    if left and right and not left.endswith("\n") and not right.startswith("\n"):
        return f"{left} {right}"
    return left + right
