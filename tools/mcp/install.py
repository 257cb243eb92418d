"""Hooking the MCP servers into the tool registry and the gateway's start and stop."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from gateway.sdk import ConfigError, Extensions, Inbound, Settings, Submission
from tools.registry import ToolRegistry

if TYPE_CHECKING:
    from gateway.sdk import CheckResult
    from tools.mcp.manager import MCPManager

Hook = Callable[[], Awaitable[None]]
Submit = Callable[[Inbound], Awaitable[Submission]]


def install_mcp_tools(
    registry: ToolRegistry,
    settings: Settings,
    *,
    starters: list[Hook],
    closers: list[Hook],
    extensions: Extensions,
    submit: Submit | None = None,
) -> MCPManager | None:
    """Add the configured MCP servers as a tool source; `starters` gets the call that connects
    them in the background, `closers` the one that stops them. With `submit`, the prompts
    named in `prompt_commands` become chat commands. None when no server is configured."""
    if not settings.mcp.servers:
        return None
    try:
        from tools.mcp.manager import MCPManager
    except ImportError as exc:
        raise ConfigError(
            [
                f"mcp.servers: the MCP SDK is not installed ({exc.name}); "
                "install it with: pip install 'chatgate[mcp]'"
            ]
        ) from None
    manager = MCPManager(settings.mcp, max_output_chars=settings.tools.max_output_chars)
    registry.add_source(manager)
    starters.append(manager.start)
    closers.append(manager.stop)
    if submit is not None:
        from tools.mcp.prompts import add_prompt_commands

        add_prompt_commands(extensions, manager, submit)
    return manager


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


async def stop_servers(registry: ToolRegistry) -> None:
    manager = mcp_manager(registry) if registry.sources else None
    if manager is not None:
        await manager.stop()


async def doctor_checks(settings: Settings) -> list[CheckResult]:
    """`chatgate doctor` lines for the MCP servers (none when none is configured)."""
    if not settings.mcp.servers:
        return []
    from tools.mcp.doctor import mcp_checks

    return await mcp_checks(settings)
