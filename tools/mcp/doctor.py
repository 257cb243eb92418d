"""`chatgate doctor` lines for MCP servers: each enabled server is started, and passes when it
connects and lists its tools within its startup timeout."""

from __future__ import annotations

from gateway.sdk import CheckResult, Settings
from tools.mcp.connection import State
from tools.mcp.manager import MCPManager


async def mcp_checks(settings: Settings) -> list[CheckResult]:
    manager = MCPManager(settings.mcp, max_output_chars=settings.tools.max_output_chars)
    await manager.start(retry=False)
    try:
        await manager.wait_settled()
        results = []
        for status in manager.statuses():
            name = f"mcp {status.name}"
            if status.reason == "disabled":
                continue
            if status.state is State.CONNECTED:
                detail = f"{status.transport}, connected, {len(status.tools)} tools"
                results.append(CheckResult(name, True, detail))
                continue
            where = "command, args and env" if status.transport == "stdio" else "url and headers"
            results.append(
                CheckResult(
                    name,
                    False,
                    f"{status.transport}, {status.state}: {status.reason}",
                    f"check mcp.servers.{status.name}.{where}; `chatgate mcp list` shows "
                    "the server's state and tools",
                )
            )
        return results
    finally:
        await manager.stop()
