"""The tool registry: every tool declared once, looked up by name, filtered per turn by policy."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.tooling import ToolScope, ToolSpec

# Decides which registered tools a scope may use; None means "all of them".
ScopeFilter = Callable[[ToolScope, Sequence[ToolSpec[Any]]], Sequence[ToolSpec[Any]]]


class DuplicateTool(ValueError):
    pass


class ToolRegistry:
    def __init__(
        self, tools: Iterable[ToolSpec[Any]] = (), *, scope_filter: ScopeFilter | None = None
    ) -> None:
        self._tools: dict[str, ToolSpec[Any]] = {}
        self._filter = scope_filter
        for tool in tools:
            self.register(tool)

    def register(self, tool: ToolSpec[Any]) -> None:
        if tool.name in self._tools:
            raise DuplicateTool(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def extend(self, tools: Iterable[ToolSpec[Any]]) -> None:
        for tool in tools:
            self.register(tool)

    def set_filter(self, scope_filter: ScopeFilter | None) -> None:
        self._filter = scope_filter

    def get(self, name: str) -> ToolSpec[Any] | None:
        return self._tools.get(name)

    def all(self) -> list[ToolSpec[Any]]:
        return list(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def groups(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for tool in self._tools.values():
            out.setdefault(tool.group, []).append(tool.name)
        return out

    def for_scope(self, scope: ToolScope) -> Sequence[ToolSpec[Any]]:
        tools = self.all()
        return tools if self._filter is None else self._filter(scope, tools)
