"""What a tool family tells the gateway about itself.

A family is the tools one module builds together: the specs it declares (built from the
services it was given), tools that come and go while the gateway runs, the buttons, middlewares
and prompt sections it adds, and what it starts and closes. The composition root builds every
family, registers them in order, starts them once the gateway runs and closes them in reverse
order when it stops; the core never imports a family. Subclass `ToolFamily` to inherit the
defaults (nothing besides the specs); each handler is a method that a test can call alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gateway.sdk.extensions import Extensions
from gateway.sdk.tooling import ToolSpec


class ToolSource(Protocol):
    """Tools that come and go while the gateway runs."""

    def tools(self) -> Sequence[ToolSpec[Any]]:
        """The tools available right now (cheap: called on every turn)."""
        ...

    def groups(self) -> Mapping[str, str]:
        """Groups this source fills (name -> description), known even while it has no tools,
        so a policy naming them is valid before the tools arrive."""
        ...


class ToolFamily(Protocol):
    name: str  # for logs and errors: "files", "browser", "mcp"

    def specs(self) -> Sequence[ToolSpec[Any]]:
        """The tools it declares, fixed once built (none when what they need is missing)."""
        ...

    def sources(self) -> Sequence[ToolSource]:
        """Tools that come and go while the gateway runs (MCP servers)."""
        return ()

    def register(self, extensions: Extensions) -> None:
        """Add its buttons, admission middlewares, commands and prompt sections."""
        return None

    async def start(self) -> None:
        """Begin background work once the gateway runs; returns at once."""
        return None

    async def close(self) -> None:
        """Release what it holds (clients, processes, listeners). Called once, also when the
        family was never started."""
        return None
