"""The configured MCP servers as one dynamic tool source: started in the background, their tools
offered while they are connected, and every stdio child stopped on shutdown.

Each process (replica) runs its own connections and its own stdio servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from gateway.sdk import MCPSettings, ToolSpec
from tools.mcp.connection import ServerConnection, ServerStatus, State
from tools.mcp.toolspecs import GROUP, group_of, server_tool_specs
from tools.mcp.transport import Mode, transport_kind

log = logging.getLogger(__name__)


class MCPManager:
    """Implements `gateway.sdk.ToolSource`."""

    def __init__(
        self, settings: MCPSettings, *, max_output_chars: int, mode: Mode = "auto"
    ) -> None:
        self._settings = settings
        self._max_chars = max_output_chars
        self._connections = {
            name: ServerConnection(
                name,
                cfg,
                reconnect_min=settings.reconnect_min_seconds,
                reconnect_max=settings.reconnect_max_seconds,
                on_change=self._changed,
                mode=mode,
            )
            for name, cfg in settings.servers.items()
            if cfg.enabled
        }
        self._specs: dict[str, list[ToolSpec[Any]]] = {}
        self._all: list[ToolSpec[Any]] = []

    # -- ToolSource ------------------------------------------------------------------------

    def tools(self) -> Sequence[ToolSpec[Any]]:
        return self._all

    def groups(self) -> Mapping[str, str]:
        # Every configured server, connected or not (or disabled), so a policy naming it is valid.
        return {
            group_of(name): f"tools of the MCP server {name}" for name in self._settings.servers
        }

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self, *, retry: bool = True) -> None:
        """Start connecting every enabled server in the background; returns at once. Without
        `retry` a server that fails stays failed (for commands that report and exit)."""
        for conn in self._connections.values():
            conn.start(retry=retry)

    async def stop(self) -> None:
        await asyncio.gather(*(conn.stop() for conn in self._connections.values()))

    async def wait_settled(self) -> None:
        """Until every server has connected or failed once, or its startup timeout (plus a
        little) has passed (for the CLI and doctor)."""
        if not self._connections:
            return
        limit = max(c.cfg.startup_timeout_seconds for c in self._connections.values()) + 2
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limit):
                await asyncio.gather(*(c.wait_settled() for c in self._connections.values()))

    # -- what the CLI and doctor show -----------------------------------------------------

    def connection(self, name: str) -> ServerConnection | None:
        return self._connections.get(name)

    def statuses(self) -> list[ServerStatus]:
        """Every configured server, in settings order; disabled ones as stopped."""
        out = []
        for name, cfg in self._settings.servers.items():
            conn = self._connections.get(name)
            if conn is not None:
                out.append(conn.status())
            else:
                out.append(
                    ServerStatus(name, transport_kind(cfg), State.STOPPED, "disabled", (), "", 0.0)
                )
        return out

    def specs_of(self, server: str) -> list[ToolSpec[Any]]:
        return list(self._specs.get(server, ()))

    def _changed(self, server: str) -> None:
        conn = self._connections.get(server)
        if conn is None:
            return
        self._specs[server] = server_tool_specs(conn, max_chars=self._max_chars)
        self._all = [spec for specs in self._specs.values() for spec in specs]


__all__ = ["GROUP", "MCPManager"]
