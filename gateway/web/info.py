"""Read-only tables the console shows about parts the core does not know (skills, MCP servers,
the tool policy): the composition root builds them from the tools, the console renders them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class InfoTable:
    title: str
    columns: tuple[str, ...]
    rows: Sequence[tuple[str, ...]] = field(default_factory=list)
    note: str = ""  # one line under the title (what the table shows, or why it is empty)


InfoSource = Callable[[], list[InfoTable]]
