"""Operator-supplied patterns that add to or relax the built-in shell checks, and the
gateway's own files that commands must not touch without asking."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from tools.shell.safety.state import GatewayPaths


@dataclass(frozen=True)
class ShellPolicy:
    """Regexes searched in each normalised simple command ("rm -rf build").

    block patterns win, then ask; an allow pattern drops the built-in `ask`s of a command
    it matches, never a built-in `block` nor a fail-closed ask (unparseable or computed code).
    `protected` holds the gateway's own places: writing, truncating or deleting them, and
    reading the secret ones, is at least `ask`.
    """

    allow: tuple[re.Pattern[str], ...] = ()
    ask: tuple[re.Pattern[str], ...] = ()
    block: tuple[re.Pattern[str], ...] = ()
    protected: GatewayPaths = field(default_factory=GatewayPaths)

    @classmethod
    def compile(
        cls,
        *,
        allow: Iterable[str] = (),
        ask: Iterable[str] = (),
        block: Iterable[str] = (),
        protected_paths: Iterable[tuple[str, str, bool]] = (),
        workspace: str = "",
        home: str | None = None,
    ) -> ShellPolicy:
        """Compile once; the same arguments give the same cached policy.

        `protected_paths`: (absolute path, label, reading it exposes secrets) triples;
        `workspace`: its root, exempt from a protected directory that contains it;
        `home`: the real home directory `~` stands for (default: this process's).
        """
        return _compiled(
            tuple(allow), tuple(ask), tuple(block), tuple(protected_paths), workspace, home
        )

    def match(self, kind: Literal["allow", "ask", "block"], lines: Sequence[str]) -> str | None:
        """The first pattern of this kind found in any of the lines."""
        for pattern in getattr(self, kind):
            if any(pattern.search(line) for line in lines):
                return str(pattern.pattern)
        return None


@lru_cache(maxsize=32)
def _compiled(
    allow: tuple[str, ...],
    ask: tuple[str, ...],
    block: tuple[str, ...],
    protected: tuple[tuple[str, str, bool], ...],
    workspace: str,
    home: str | None,
) -> ShellPolicy:
    return ShellPolicy(
        allow=tuple(re.compile(p) for p in allow),
        ask=tuple(re.compile(p) for p in ask),
        block=tuple(re.compile(p) for p in block),
        protected=GatewayPaths.build(protected, workspace, home),
    )
