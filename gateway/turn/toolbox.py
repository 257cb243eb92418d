"""The tools one turn offers the model: all the policy allows, or (tools on demand) a core set
plus what the session loaded, with a meta-tool that names the rest and loads it.

Schemas of every installed tool cost thousands of tokens per call, more than a small local
model handles well. With on-demand offering the policy still decides what may be used (only
allowed tools are ever loaded or run); the toolbox only decides what is *described* each step.
A call to an allowed tool that was not loaded yet loads it and runs, so a model that guesses
a name from the group list is not refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from gateway.sdk.tooling import ToolSpec

# Builds the meta-tool's spec for the toolbox as it is now (its description lists what waits).
LoaderFactory = Callable[["Toolbox"], ToolSpec[Any]]


class Toolbox:
    def __init__(
        self,
        allowed: Sequence[ToolSpec[Any]],
        offered: Iterable[str] | None = None,
        *,
        loaded: Iterable[str] = (),
        loader: LoaderFactory | None = None,
        loader_name: str = "",
    ) -> None:
        """`offered`: names sent from the start (None: every allowed tool); `loaded`: names
        loaded earlier in the session; `loader`: the meta-tool, offered while anything waits."""
        self._allowed = {tool.name: tool for tool in allowed}
        start = list(self._allowed) if offered is None else list(offered)
        self._offered = [name for name in start if name in self._allowed]
        self._loaded: list[str] = []
        self._loader = loader
        self._loader_name = loader_name
        self._loader_spec: tuple[tuple[str, ...], ToolSpec[Any]] | None = None
        self.load(loaded)

    @property
    def allowed(self) -> list[ToolSpec[Any]]:
        return list(self._allowed.values())

    @property
    def loaded(self) -> list[str]:
        """Names loaded beyond the starting set, to keep with the session."""
        return list(self._loaded)

    def known(self) -> list[ToolSpec[Any]]:
        """Every tool a call may name this turn: the allowed ones and the meta-tool."""
        loader = self._loader_now()
        return [*self._allowed.values(), *([loader] if loader is not None else [])]

    def waiting(self) -> list[ToolSpec[Any]]:
        """Allowed tools not offered yet."""
        offered = set(self._offered)
        return [t for name, t in self._allowed.items() if name not in offered]

    def specs(self) -> list[ToolSpec[Any]]:
        """What the model is told about on this step."""
        specs = [self._allowed[name] for name in self._offered]
        loader = self._loader_now()
        return [*specs, loader] if loader is not None else specs

    def get(self, name: str) -> ToolSpec[Any] | None:
        """The tool to run for a call, or None when it may not run here. An allowed tool that
        was not loaded is loaded by being called."""
        if name == self._loader_name and self._loader is not None:
            return self._loader_now()
        tool = self._allowed.get(name)
        if tool is not None and name not in self._offered:
            self.load([name])
        return tool

    def load(self, names: Iterable[str]) -> list[str]:
        """Offer these allowed tools from now on; returns the ones that were not offered yet.
        Names the policy does not allow are ignored."""
        added = []
        for name in names:
            if name in self._allowed and name not in self._offered:
                self._offered.append(name)
                self._loaded.append(name)
                added.append(name)
        return added

    def _loader_now(self) -> ToolSpec[Any] | None:
        if self._loader is None:
            return None
        waiting = tuple(t.name for t in self.waiting())
        if not waiting:
            return None
        # Rebuilt only when what waits changes, so the schema (and the provider's prompt
        # cache) stays the same from one step to the next.
        if self._loader_spec is None or self._loader_spec[0] != waiting:
            self._loader_spec = (waiting, self._loader(self))
        return self._loader_spec[1]
