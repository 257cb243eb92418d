"""Operator-supplied patterns that add to or relax the built-in shell checks."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal


@dataclass(frozen=True)
class ShellPolicy:
    """Regexes searched in each normalised simple command ("rm -rf build").

    block patterns win, then ask; an allow pattern drops the built-in `ask`s of a command
    it matches, never a built-in `block` nor a fail-closed ask (unparseable or computed code).
    """

    allow: tuple[re.Pattern[str], ...] = ()
    ask: tuple[re.Pattern[str], ...] = ()
    block: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def compile(
        cls, *, allow: Iterable[str] = (), ask: Iterable[str] = (), block: Iterable[str] = ()
    ) -> ShellPolicy:
        """Compile once; the same pattern lists give the same cached policy."""
        return _compiled(tuple(allow), tuple(ask), tuple(block))

    def match(self, kind: Literal["allow", "ask", "block"], lines: Sequence[str]) -> str | None:
        """The first pattern of this kind found in any of the lines."""
        for pattern in getattr(self, kind):
            if any(pattern.search(line) for line in lines):
                return str(pattern.pattern)
        return None


@lru_cache(maxsize=32)
def _compiled(allow: tuple[str, ...], ask: tuple[str, ...], block: tuple[str, ...]) -> ShellPolicy:
    return ShellPolicy(
        allow=tuple(re.compile(p) for p in allow),
        ask=tuple(re.compile(p) for p in ask),
        block=tuple(re.compile(p) for p in block),
    )
