"""Tools on demand: the core set (`tools.core`) is described every turn; every other allowed
group is one line in the description of `load_tools`, which adds its schemas for the rest of
the session (gateway/turn/toolbox.py holds the mechanism, the policy still decides what is allowed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import Field

from gateway.sdk import Toolbox, ToolContext, ToolError, ToolSpec
from tools.args import ToolArgs
from tools.toolsets import GROUP_PREFIX, TOOLSETS, expand

LOAD_TOOLS = "load_tools"
GROUP = "tools"
_LABEL = 50  # characters of a group's description
_NAMES_SHOWN = 3  # tool names listed per group; a server with fifty tools stays one short line
_SPECS_KEPT = 256  # distinct waiting sets remembered (scopes x what sessions loaded)


class LoadToolsArgs(ToolArgs):
    names: list[str] = Field(
        min_length=1,
        description="Groups from the list (e.g. browser, cron) or tool names to load.",
    )


class OnDemand:
    """Builds each turn's Toolbox for ToolRegistry.toolbox (set with `set_offer`)."""

    def __init__(self, core: Sequence[str], declared: Callable[[], Mapping[str, str]]) -> None:
        self._core = list(core)
        self._declared = declared  # group descriptions of dynamic sources (MCP servers)
        # The same waiting tools get the same spec object turn after turn: its schema is
        # built once and the LLM client reuses the tools' JSON (it caches by identity).
        self._specs: dict[tuple[Any, ...], ToolSpec[Any]] = {}

    def __call__(self, allowed: Sequence[ToolSpec[Any]], loaded: Sequence[str]) -> Toolbox:
        core = expand(self._core, allowed)
        offered = [tool.name for tool in allowed if tool.name in core]
        return Toolbox(allowed, offered, loaded=loaded, loader=self._loader, loader_name=LOAD_TOOLS)

    def _loader(self, box: Toolbox) -> ToolSpec[Any]:
        waiting = box.waiting()
        about = {**self._declared(), **TOOLSETS}
        key = (tuple((t.name, t.group) for t in waiting), tuple(sorted(about.items())))
        spec = self._specs.get(key)
        if spec is None:
            if len(self._specs) >= _SPECS_KEPT:
                self._specs.clear()
            spec = self._specs[key] = ToolSpec(
                name=LOAD_TOOLS,
                description=describe_waiting(waiting, about),
                args=LoadToolsArgs,
                handler=_load,
                group=GROUP,
            )
        return spec


def describe_waiting(waiting: Sequence[ToolSpec[Any]], about: Mapping[str, str]) -> str:
    groups: dict[str, list[str]] = {}
    for tool in waiting:
        groups.setdefault(tool.group, []).append(tool.name)
    lines = [
        "Load more tools for the rest of this conversation, then call them as usual. "
        "Groups not loaded yet:"
    ]
    for group, names in sorted(groups.items()):
        # "workspace files: read_file, ..." -> "workspace files"; the names follow anyway.
        label = about.get(group) or about.get(group.partition(":")[0], "")
        label = _clip(label.partition(":")[0].strip())
        shown = ", ".join(names[:_NAMES_SHOWN])
        more = f" +{len(names) - _NAMES_SHOWN}" if len(names) > _NAMES_SHOWN else ""
        lines.append(
            f"- {group}: {label} ({shown}{more})" if label else f"- {group} ({shown}{more})"
        )
    return "\n".join(lines)


async def _load(args: LoadToolsArgs, ctx: ToolContext) -> str:
    box = ctx.toolbox
    if box is None:
        raise ToolError("tools cannot be loaded here; use the tools you have.")
    allowed = box.allowed
    names = {tool.name for tool in allowed}
    wanted: list[str] = []
    unknown: list[str] = []
    for raw in args.names:
        entry = raw.strip()
        if entry in names:
            wanted.append(entry)
            continue
        group = entry.removeprefix(GROUP_PREFIX)
        in_group = expand([GROUP_PREFIX + group], allowed)
        members = [tool.name for tool in allowed if tool.name in in_group]
        if members:
            wanted.extend(members)
        else:
            unknown.append(entry)
    added = box.load(wanted)
    parts = []
    if added:
        parts.append(f"Loaded: {', '.join(added)}. Call them now as needed.")
    elif wanted:
        parts.append(f"Already available: {', '.join(dict.fromkeys(wanted))}.")
    if unknown:
        groups = sorted({tool.group for tool in box.waiting()})
        parts.append(
            f"Not available here: {', '.join(unknown)}. Groups you can load: "
            f"{', '.join(groups) or 'none'}."
        )
    return " ".join(parts)


def _clip(label: str) -> str:
    if len(label) <= _LABEL:
        return label
    return label[: label.rfind(" ", 0, _LABEL)].rstrip(",;") + "…"
