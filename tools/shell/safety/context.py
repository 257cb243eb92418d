"""What a rule may consult besides the command: where paths resolve, the gateway's own
files, and a way to judge code embedded in an argument (python -c, awk, tar --to-command)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tools.shell.safety.model import Command, Finding, Hit
from tools.shell.safety.paths import Scope
from tools.shell.safety.state import GatewayPaths


@dataclass(frozen=True)
class Context:
    scope: Scope
    analyze: Callable[[str], list[Finding]]  # judge a string as shell code, one level deeper
    state: GatewayPaths = field(default_factory=GatewayPaths)  # the gateway's own files


Rule = Callable[[Command, Context], Iterable[Hit]]


def shown(words: Iterable[str], limit: int = 80) -> str:
    """A short, one-line rendering of some arguments for a reason."""
    text = " ".join(words).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"
