"""MCP tools as chatgate tools: one `ToolSpec` per server tool, named `mcp_<server>_<tool>`, in
the policy group `mcp:<server>`, asking for approval as the server's `approval` setting says."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from mcp.types import Tool

from gateway.sdk import ApprovalNeed, MCPServerSettings, ToolContext, ToolError, ToolSpec, untrusted
from tools.mcp.arguments import MCPArguments, arguments_model
from tools.mcp.connection import ServerConnection
from tools.mcp.naming import tool_name
from tools.mcp.results import tool_output
from tools.shell.exact import exact

GROUP = "mcp"
_SHOWN_ARGUMENTS = 1500  # characters of arguments in an approval prompt
_CALL_MARGIN = 5.0  # the agent's timeout leaves the server's own timeout room to answer


def group_of(server: str) -> str:
    return f"{GROUP}:{server}"


def read_only(cfg: MCPServerSettings, tool: Tool) -> bool:
    """Whether calls of `tool` change nothing: the operator listed it in `read_only_tools`,
    or the server says so and its hints are trusted (`trust_hints`)."""
    if any(fnmatch.fnmatchcase(tool.name, pattern) for pattern in cfg.read_only_tools):
        return True
    hints = tool.annotations
    return (
        cfg.trust_hints
        and hints is not None
        and hints.read_only_hint is True
        and hints.destructive_hint is not True
    )


def approval_reason(cfg: MCPServerSettings, tool: Tool, server: str) -> str | None:
    """Why a call of `tool` needs a person's approval, or None when it does not."""
    if cfg.approval == "never":
        return None
    if cfg.approval == "always":
        return f"the MCP server '{server}' is set to ask before every tool call"
    if read_only(cfg, tool):
        return None
    hints = tool.annotations
    if not cfg.trust_hints:
        return (
            f"{tool.name} is not listed in mcp.servers.{server}.read_only_tools "
            f"(the server's own read-only marks are not trusted)"
        )
    if hints is not None and hints.destructive_hint is True:
        return f"'{server}' marks {tool.name} as destructive"
    return f"'{server}' does not mark {tool.name} as read-only"


def server_tool_specs(conn: ServerConnection, *, max_chars: int) -> list[ToolSpec[Any]]:
    taken: set[str] = set()
    return [
        _spec(conn, tool, tool_name(conn.name, tool.name, taken), max_chars) for tool in conn.tools
    ]


def _spec(conn: ServerConnection, tool: Tool, name: str, max_chars: int) -> ToolSpec[Any]:
    server = conn.name
    reason = approval_reason(conn.cfg, tool, server)
    title = tool.title or (tool.annotations.title if tool.annotations else None)
    about = (tool.description or title or tool.name).strip()
    # The server wrote the descriptions: outside content, like what its tools return.
    source = f"MCP server {server}"
    description = f"{untrusted.wrap(source, about)}\n(MCP server '{server}', tool '{tool.name}')"

    async def handler(args: MCPArguments, ctx: ToolContext) -> str:
        output = tool_output(await conn.call_tool(tool.name, args.root), max_chars=max_chars)
        if output.is_error:
            # The server's words are outside content even in an error.
            raise ToolError(
                f"{tool.name} on MCP server '{server}' failed: {untrusted.wrap(name, output.text)}"
            )
        if ctx.images is not None:  # the turn's model may see them
            for part in output.media:
                if part.kind == "image":
                    ctx.images.show(part.data)
        return output.text

    async def approval(args: MCPArguments, ctx: ToolContext) -> ApprovalNeed | None:
        if reason is None:
            return None
        shown = json.dumps(args.root, ensure_ascii=False, indent=1, sort_keys=True)
        if len(shown) > _SHOWN_ARGUMENTS:
            shown = shown[:_SHOWN_ARGUMENTS] + " …"
        canonical = json.dumps(args.root, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return ApprovalNeed(
            summary=f"MCP server {server}, tool {tool.name}\n{shown}",
            reason=reason,
            # "For this session" or "always" covers this tool with exactly these arguments.
            shape=exact(f"mcp {server} {tool.name} {canonical}"),
        )

    return ToolSpec(
        name=name,
        description=description,
        args=arguments_model(name, tool.input_schema, lambda text: untrusted.wrap(source, text)),
        handler=handler,
        group=group_of(server),
        approval=approval if reason is not None else None,
        timeout=conn.cfg.timeout_seconds + _CALL_MARGIN,
        # What a server answers is outside content; after it, calls of tools the server does
        # not mark read-only wait for a person.
        untrusted_output=True,
        side_effects=not read_only(conn.cfg, tool),
        extras={"mcp_server": server, "mcp_tool": tool.name, "mcp_description": about},
    )
