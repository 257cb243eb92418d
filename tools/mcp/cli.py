"""`chatgate mcp list | resources | prompts`: the configured MCP servers as this machine sees them.

Each command starts the servers itself (stdio children included), waits until every one has
connected or failed once, prints, and stops them; it does not talk to a running gateway.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from tools.tables import print_table, short

if TYPE_CHECKING:
    from gateway.sdk import Settings
    from tools.mcp.connection import ServerConnection
    from tools.mcp.manager import MCPManager

EXIT_OK, EXIT_FAILED, EXIT_CONFIG = 0, 1, 2


def register(subparsers: Any) -> None:
    """Add `mcp` to the `chatgate` argument parser (called from gateway/app/cli.py)."""
    mcp = subparsers.add_parser("mcp", help="MCP servers: state, tools, resources, prompts")
    sub = mcp.add_subparsers(dest="mcp_command", required=True)
    sub.add_parser("list", help="each server, its state and its tools").set_defaults(func=cmd_list)
    resources = sub.add_parser("resources", help="the resources a server offers")
    resources.add_argument("server")
    resources.add_argument("--read", metavar="URI", help="print one resource's contents")
    resources.set_defaults(func=cmd_resources)
    prompts = sub.add_parser("prompts", help="the prompts a server offers")
    prompts.add_argument("server")
    prompts.set_defaults(func=cmd_prompts)


def cmd_list(settings: Settings, args: argparse.Namespace) -> int:
    async def body(manager: MCPManager) -> int:
        from tools.mcp.connection import State
        from tools.mcp.toolspecs import group_of

        failed = False
        rows = []
        for status in manager.statuses():
            if status.state is State.CONNECTED:
                detail = f"protocol {status.protocol}"
            else:
                detail = status.reason
                failed = failed or status.reason != "disabled"
            rows.append(
                (status.name, status.transport, str(status.state), str(len(status.tools)), detail)
            )
        print_table(("SERVER", "TRANSPORT", "STATE", "TOOLS", "DETAIL"), rows)
        for status in manager.statuses():
            specs = manager.specs_of(status.name)
            if not specs:
                continue
            print(f"\n{status.name} (group:{group_of(status.name)}):")
            print_table(
                ("TOOL", "SERVER TOOL", "APPROVAL", "DESCRIPTION"),
                [
                    (
                        s.name,
                        s.extras["mcp_tool"],
                        "asks" if s.approval else "",
                        short(s.extras.get("mcp_description", s.description)),
                    )
                    for s in specs
                ],
            )
        return EXIT_FAILED if failed else EXIT_OK

    return _with_servers(settings, body)


def cmd_resources(settings: Settings, args: argparse.Namespace) -> int:
    async def body(conn: ServerConnection) -> int:
        from tools.mcp.results import resource_text

        if args.read:
            result = await conn.read_resource(args.read)
            for contents in result.contents:
                print(resource_text(contents)[0])
            return EXIT_OK
        found = await conn.list_resources()
        if not found:
            print(f"{conn.name} offers no resources")
            return EXIT_OK
        rows = [(str(r.uri), r.name, r.mime_type or "", short(r.description or "")) for r in found]
        print_table(("URI", "NAME", "TYPE", "DESCRIPTION"), rows)
        return EXIT_OK

    return _with_server(settings, args.server, body)


def cmd_prompts(settings: Settings, args: argparse.Namespace) -> int:
    async def body(conn: ServerConnection) -> int:
        found = await conn.list_prompts()
        if not found:
            print(f"{conn.name} offers no prompts")
            return EXIT_OK
        commands = set(conn.cfg.prompt_commands)
        rows = [
            (
                p.name,
                ", ".join(a.name + ("" if a.required else "?") for a in p.arguments or ()),
                "yes" if p.name in commands else "",
                short(p.description or ""),
            )
            for p in found
        ]
        print_table(("PROMPT", "ARGUMENTS", "COMMAND", "DESCRIPTION"), rows)
        return EXIT_OK

    return _with_server(settings, args.server, body)


def _with_server(
    settings: Settings, name: str, body: Callable[[ServerConnection], Awaitable[int]]
) -> int:
    """Run `body` on one server, started alone; a server that is not connected or refuses
    the request is reported in one line."""
    server = settings.mcp.servers.get(name)
    if server is None or not server.enabled:
        return _unknown_server(settings, name)
    only = settings.model_copy(
        update={"mcp": settings.mcp.model_copy(update={"servers": {name: server}})}
    )

    async def run(manager: MCPManager) -> int:
        from tools.mcp.connection import State

        conn = manager.connection(name)
        assert conn is not None
        status = conn.status()
        if status.state is not State.CONNECTED:
            print(f"chatgate: MCP server {name}: {status.state}, {status.reason}", file=sys.stderr)
            return EXIT_FAILED
        try:
            return await body(conn)
        except Exception as exc:  # the server refused: say so in one line
            print(f"chatgate: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_FAILED

    return _with_servers(only, run)


def _with_servers(settings: Settings, body: Callable[[MCPManager], Awaitable[int]]) -> int:
    """Run `body` with the servers started and settled; stop them after."""
    import asyncio

    from gateway.sdk import setup_logging

    if not settings.mcp.servers:
        print("no MCP servers configured (add [mcp.servers.<name>] to chatgate.toml)")
        return EXIT_OK
    # The servers' own failures are the output; log lines would repeat them.
    setup_logging(settings.model_copy(update={"log_level": "CRITICAL"}))

    async def run() -> int:
        from tools.mcp.manager import MCPManager

        manager = MCPManager(settings.mcp, max_output_chars=settings.tools.max_output_chars)
        await manager.start(retry=False)
        try:
            await manager.wait_settled()
            return await body(manager)
        finally:
            await manager.stop()

    return asyncio.run(run())


def _unknown_server(settings: Settings, name: str) -> int:
    configured = settings.mcp.servers
    if name in configured:
        print(f"chatgate: the MCP server {name!r} is disabled (enabled = false)", file=sys.stderr)
        return EXIT_CONFIG
    known = ", ".join(configured) or "none"
    print(f"chatgate: no MCP server named {name!r}; configured: {known}", file=sys.stderr)
    return EXIT_CONFIG
