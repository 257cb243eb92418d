"""Toolsets: every tool belongs to exactly one (its `ToolSpec.group`); groups name sets of tools
in the policy as `group:<name>`, and a few composite groups bundle toolsets. A group also holds
its subgroups: `group:mcp` is every `mcp:<server>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gateway.sdk import ToolSpec

GROUP_PREFIX = "group:"
WILDCARD = "*"

# The toolsets chatgate declares, whether or not any tool in them is registered yet.
TOOLSETS: dict[str, str] = {
    "fs": "workspace files: read_file, write_file, edit_file, glob, search, save_attachment",
    "runtime": "running commands: shell, execute_code, process",
    "web": "the web: web_fetch, web_search, web_extract, web_crawl",
    "browser": "a real browser for pages that need JavaScript, forms or several steps",
    "memory": "durable notes about the chat and the person: memory",
    "session": "working with the user in this conversation: todo, clarify, read_channel",
    "cron": "reminders and scheduled prompts",
    "skills": "reusable instructions (skills): skill, skill_manage",
    "subagent": "delegating work to sub-agents",
    "mcp": "tools of the MCP servers in mcp.servers (one server: group:mcp:<name>)",
    "media": "files and media into the chat: send_file, image_generate, text_to_speech, "
    "vision_analyze",
    "history": "past conversations: session_search",
}

# Groups made of other toolsets.
COMPOSITES: dict[str, tuple[str, ...]] = {
    "core": ("fs", "runtime", "web"),
}


def known_groups(tools: Iterable[ToolSpec[Any]], declared: Iterable[str] = ()) -> set[str]:
    """Group names the policy accepts: declared toolsets, composites, any tool's own group, and
    the groups dynamic tool sources declare (`declared`)."""
    return {*TOOLSETS, *COMPOSITES, *(tool.group for tool in tools), *declared}


def group_members(group: str, tools: Sequence[ToolSpec[Any]]) -> set[str]:
    toolsets = COMPOSITES.get(group, (group,))
    return {tool.name for tool in tools if any(_within(tool.group, t) for t in toolsets)}


def _within(group: str, toolset: str) -> bool:
    return group == toolset or group.startswith(toolset + ":")


def expand(names: Iterable[str], tools: Sequence[ToolSpec[Any]]) -> set[str]:
    """Tool names meant by a list of tool names, `group:<name>`s and `*`. Unknown names vanish
    here; `tools.policy.validate_policy` reports them at startup."""
    out: set[str] = set()
    for name in names:
        if name == WILDCARD:
            out.update(tool.name for tool in tools)
        elif name.startswith(GROUP_PREFIX):
            out |= group_members(name.removeprefix(GROUP_PREFIX), tools)
        else:
            out.add(name)
    return out


def describe_groups(
    tools: Sequence[ToolSpec[Any]], declared: Mapping[str, str] | None = None
) -> list[tuple[str, list[str], str]]:
    """(group:name, member tools, description) for every known group, composites last."""
    about = {**(declared or {}), **TOOLSETS}
    rows = []
    for group in sorted(known_groups(tools, about) - set(COMPOSITES)):
        members = sorted(group_members(group, tools))
        rows.append((GROUP_PREFIX + group, members, about.get(group, "")))
    for group, parts in COMPOSITES.items():
        members = sorted(group_members(group, tools))
        joined = " + ".join(GROUP_PREFIX + p for p in parts)
        rows.append((GROUP_PREFIX + group, members, joined))
    return rows
