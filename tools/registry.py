"""The tool registry: every tool declared once, looked up by name, filtered per turn by policy.

Most tools are registered once at start. Tools that come and go at run time (those of MCP
servers) come from a `ToolSource` the registry consults on every lookup; a source's tool never
shadows a registered one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.sdk import Toolbox, ToolScope, ToolSource, ToolSpec

log = logging.getLogger(__name__)

# Decides which registered tools a scope may use; None means "all of them".
ScopeFilter = Callable[[ToolScope, Sequence[ToolSpec[Any]]], Sequence[ToolSpec[Any]]]
# Builds a turn's Toolbox from the allowed tools and those the session loaded (tools on demand).
Offer = Callable[[Sequence[ToolSpec[Any]], Sequence[str]], Toolbox]


class DuplicateTool(ValueError):
    pass


class ToolRegistry:
    def __init__(
        self, tools: Iterable[ToolSpec[Any]] = (), *, scope_filter: ScopeFilter | None = None
    ) -> None:
        self._tools: dict[str, ToolSpec[Any]] = {}
        self._sources: list[ToolSource] = []
        self._shadowed: set[str] = set()  # source tool names already reported as clashing
        self._filter = scope_filter
        self._offer: Offer | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: ToolSpec[Any]) -> None:
        if tool.name in self._tools:
            raise DuplicateTool(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def extend(self, tools: Iterable[ToolSpec[Any]]) -> None:
        for tool in tools:
            self.register(tool)

    def add_source(self, source: ToolSource) -> None:
        self._sources.append(source)

    @property
    def sources(self) -> tuple[ToolSource, ...]:
        return tuple(self._sources)

    def set_filter(self, scope_filter: ScopeFilter | None) -> None:
        self._filter = scope_filter

    def set_offer(self, offer: Offer | None) -> None:
        """How turns are offered the allowed tools (None: all of them, every step)."""
        self._offer = offer

    def get(self, name: str) -> ToolSpec[Any] | None:
        tool = self._tools.get(name)
        if tool is None and self._sources:
            tool = next((t for t in self._from_sources() if t.name == name), None)
        return tool

    def all(self) -> list[ToolSpec[Any]]:
        return [*self._tools.values(), *self._from_sources()]

    def names(self) -> list[str]:
        return [tool.name for tool in self.all()]

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for tool in self.all():
            out.setdefault(tool.group, []).append(tool.name)
        return out

    def declared_groups(self) -> dict[str, str]:
        """Groups the sources fill, with their descriptions, whether or not they have tools."""
        out: dict[str, str] = {}
        for source in self._sources:
            out.update(source.groups())
        return out

    def for_scope(self, scope: ToolScope) -> Sequence[ToolSpec[Any]]:
        tools = [tool for tool in self.all() if tool.unavailable_in(scope) is None]
        return tools if self._filter is None else self._filter(scope, tools)

    def unavailable(self, scope: ToolScope) -> dict[str, str]:
        """Tools not offered in `scope` whatever the policy says, each with the reason."""
        found = ((tool.name, tool.unavailable_in(scope)) for tool in self.all())
        return {name: reason for name, reason in found if reason is not None}

    def toolbox(
        self, scope: ToolScope, loaded: Sequence[str] = (), *, exclude: Sequence[str] = ()
    ) -> Toolbox:
        allowed = [tool for tool in self.for_scope(scope) if tool.name not in exclude]
        return Toolbox(allowed) if self._offer is None else self._offer(allowed, loaded)

    def _from_sources(self) -> list[ToolSpec[Any]]:
        out: list[ToolSpec[Any]] = []
        seen = set(self._tools)
        for source in self._sources:
            for tool in source.tools():
                if tool.name in seen:
                    if tool.name not in self._shadowed:
                        self._shadowed.add(tool.name)
                        log.warning("tool name taken, source tool ignored tool=%s", tool.name)
                    continue
                seen.add(tool.name)
                out.append(tool)
        return out
