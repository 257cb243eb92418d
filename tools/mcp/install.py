"""The MCP family: the configured servers as a tool source, started and stopped with the
gateway; and the helpers `chatgate tools` and `doctor` use to start them and report."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from gateway.sdk import (
    ConfigError,
    Extensions,
    Inbound,
    Settings,
    Submission,
    ToolFamily,
    ToolSource,
    ToolSpec,
)
from tools.registry import ToolRegistry

if TYPE_CHECKING:
    from gateway.sdk import CheckResult
    from tools.mcp.manager import MCPManager

Submit = Callable[[Inbound], Awaitable[Submission]]


class MCPTools(ToolFamily):
    """The configured MCP servers as one tool source, connecting in the background from
    `start` on and stopped at `close`. With `submit`, the prompts named in `prompt_commands`
    become chat commands. Raises ConfigError when servers are configured and the MCP SDK is
    not installed."""

    name = "mcp"

    def __init__(self, settings: Settings, *, submit: Submit | None = None) -> None:
        self.manager: MCPManager | None = None
        self.submit = submit
        if not settings.mcp.servers:
            return
        try:
            from tools.mcp.manager import MCPManager
        except ImportError as exc:
            raise ConfigError(
                [
                    f"mcp.servers: the MCP SDK is not installed ({exc.name}); "
                    "install it with: pip install 'chatgate[mcp]'"
                ]
            ) from None
        self.manager = MCPManager(settings.mcp, max_output_chars=settings.tools.max_output_chars)

    def specs(self) -> list[ToolSpec[Any]]:
        return []  # the servers' tools come and go: `sources`

    def sources(self) -> list[ToolSource]:
        return [] if self.manager is None else [self.manager]

    def register(self, extensions: Extensions) -> None:
        if self.manager is not None and self.submit is not None:
            from tools.mcp.prompts import add_prompt_commands

            add_prompt_commands(extensions, self.manager, self.submit)

    async def start(self) -> None:
        if self.manager is not None:
            await self.manager.start()

    async def close(self) -> None:
        if self.manager is not None:
            await self.manager.stop()


def mcp_manager(registry: ToolRegistry) -> MCPManager | None:
    """The MCP source installed in `registry`, if any."""
    from tools.mcp.manager import MCPManager

    return next((s for s in registry.sources if isinstance(s, MCPManager)), None)


async def start_servers(registry: ToolRegistry) -> list[str]:
    """Start the MCP servers of `registry` and wait until each has connected or failed once;
    returns one line for each server that is not connected."""
    manager = mcp_manager(registry) if registry.sources else None
    if manager is None:
        return []
    await manager.start(retry=False)
    await manager.wait_settled()
    return [f"MCP server {s.name}: {s.state}, {s.reason}" for s in manager.statuses() if s.reason]


async def doctor_checks(settings: Settings) -> list[CheckResult]:
    """`chatgate doctor` lines for the MCP servers (none when none is configured)."""
    if not settings.mcp.servers:
        return []
    from tools.mcp.doctor import mcp_checks

    return await mcp_checks(settings)
