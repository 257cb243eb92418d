"""The workspace jail: every file path a tool touches must resolve inside one directory."""

from __future__ import annotations

from pathlib import Path

from gateway.tooling import ToolError


class Workspace:
    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root.resolve()

    def resolve(self, path: str) -> Path:
        """The real path for `path`, refusing anything outside the workspace.

        Symlinks are resolved first, so a link pointing out of the workspace is refused
        just like `../` or an absolute path elsewhere.
        """
        if not path or not path.strip():
            raise ToolError("the path is empty; give a path relative to the workspace.")
        if "\x00" in path:
            raise ToolError("the path contains a NUL byte.")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        real = candidate.resolve()
        if real != self.root and not real.is_relative_to(self.root):
            raise ToolError(
                f"{path!r} is outside the workspace; only paths inside the workspace are allowed "
                "(use a relative path like 'notes/todo.md')."
            )
        return real

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path != self.root else "."
