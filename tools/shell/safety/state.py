"""The gateway's own files (data directory, config, store, skills, code) as the checks see
them: which protected place a path falls in, and whether it lies in the workspace."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from tools.shell.safety.paths import HOME

_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class GuardedPath:
    path: str  # absolute and normalised; `~/...` spelled with paths.HOME when under home
    label: str  # "the gateway's config file"
    secret: bool  # reading it exposes secrets (tokens, other chats' history)


@dataclass(frozen=True)
class GatewayPaths:
    """Protected places, each listed in its real form and, under home, in its `~` form."""

    entries: tuple[GuardedPath, ...] = ()
    workspace: tuple[str, ...] = ()  # the workspace root in the same two forms
    home: str = ""  # the real home directory, when known
    names: frozenset[str] = frozenset()  # last components of the entries, for quick tests

    @classmethod
    def build(
        cls,
        protected: Iterable[tuple[str, str, bool]],
        workspace: str = "",
        home: str | None = None,
    ) -> GatewayPaths:
        """`protected`: (absolute path, label, secret) triples; `home`: the real home."""
        home = posixpath.normpath(home or os.path.expanduser("~"))
        entries = [
            GuardedPath(form, label, secret)
            for path, label, secret in protected
            if path.startswith("/")
            for form in _forms(path, home)
        ]
        # The most specific place wins (the skills directory inside the data directory).
        entries.sort(key=lambda e: len(e.path), reverse=True)
        spaces = _forms(workspace, home) if workspace.startswith("/") else ()
        names = frozenset(posixpath.basename(e.path) for e in entries)
        return cls(tuple(entries), tuple(spaces), home, names)

    def owner(self, path: str) -> GuardedPath | None:
        """The protected place `path` is or lies in (the workspace inside one is not)."""
        if not self.entries or not path.startswith("/"):
            return None
        for entry in self.entries:
            if _covers(entry.path, path):
                if any(_under(path, w) and _under(w, entry.path) for w in self.workspace):
                    return None
                return entry
        return None

    def inside(self, path: str) -> GuardedPath | None:
        """A protected place that lies under `path` (deleting `path` recursively hits it)."""
        for entry in self.entries:
            if _covers(path, entry.path) and not any(_under(path, w) for w in self.workspace):
                return entry
        return None

    def in_workspace(self, path: str) -> bool:
        return any(_under(path, w) for w in self.workspace)

    def in_home(self, path: str) -> bool:
        """Under a home directory: `~`, /home/<user>, /root or the real home."""
        if _under(path, HOME) or re.match(r"/(home/[^/]+|root)(/|$)", path):
            return True
        return bool(self.home) and self.home != "/" and _under(path, self.home)


def _forms(path: str, home: str) -> tuple[str, ...]:
    path = posixpath.normpath(path)
    if home != "/" and _under(path, home):
        return path, HOME + path[len(home) :]
    return (path,)


def _covers(base: str, path: str) -> bool:
    """`path` is `base` or lies under it; glob components of either side match as globs
    (`~/.chat*` covers `~/.chatgate`, `~/.chatgate/*` lies in it)."""
    if _under(path, base):
        return True
    if not _GLOB.search(path + base):
        return False
    outer, inner = base.split("/"), path.split("/")
    return len(inner) >= len(outer) and all(
        fnmatchcase(a, b) or fnmatchcase(b, a) for a, b in zip(outer, inner, strict=False)
    )


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")
