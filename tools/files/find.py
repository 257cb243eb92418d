"""Finding things in the workspace: `glob` lists files by pattern, `search` greps their lines.

Both walk the tree by directory fds without following symlinked directories, list a symlinked
file only when it points inside the workspace, never read a hard-linked file, and stop at a cap
so a huge tree cannot flood the model.
"""

from __future__ import annotations

import asyncio
import re
import stat
import time
from collections.abc import Iterator
from typing import Any

from pydantic import Field

from gateway.sdk import ToolContext, ToolError, ToolFamily, ToolSpec, untrusted
from tools.args import ToolArgs
from tools.files.workspace import OpenFile, WalkEntry, Workspace, WorkspaceFor

GROUP = "fs"
MAX_GLOB_RESULTS = 200
MAX_WALK_ENTRIES = 200_000  # files looked at before giving up on a huge tree
MAX_SEARCH_FILE_BYTES = 5 * 1024 * 1024
MAX_LINE_CHARS = 300  # a matching line is cut to this in the result
MAX_MATCH_LINE_CHARS = 4000  # longer lines are matched on their start only (bounds regex work)
WALK_SECONDS = 20.0
# Bulky trees nobody means to grep; still reachable by pointing `path` inside them.
SKIPPED_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", ".mypy_cache"})


class GlobArgs(ToolArgs):
    pattern: str = Field(
        description="Glob like '*.py' (any depth), 'src/**/test_*.py' or 'docs/*.md'."
    )
    path: str = Field(default=".", description="Directory to search in, relative to workspace.")


class SearchArgs(ToolArgs):
    pattern: str = Field(description="Regular expression (Python syntax) or, with fixed, text.")
    path: str = Field(default=".", description="File or directory to search, relative.")
    glob: str = Field(default="", description="Only files matching this glob, e.g. '*.md'.")
    fixed: bool = Field(default=False, description="Treat pattern as plain text.")
    ignore_case: bool = False
    max_results: int = Field(default=100, ge=1, le=500)


class FindTools(ToolFamily):
    """glob and search over the workspace of the chat a call runs in."""

    name = "find"

    def __init__(self, workspace_for: WorkspaceFor) -> None:
        self.workspace_for = workspace_for

    async def glob_files(self, args: GlobArgs, ctx: ToolContext) -> str:
        workspace = self.workspace_for(ctx)
        base = _directory(workspace, args.path)
        matcher = glob_regex(args.pattern)
        found, truncated = await asyncio.to_thread(
            _collect, workspace, args.path, matcher, MAX_GLOB_RESULTS
        )
        if not found:
            return f"no files match {args.pattern!r} under {base}."
        listing = "\n".join(found)
        if truncated:
            listing += f"\n[first {len(found)} shown; narrow the pattern or the path]"
        return listing

    async def search(self, args: SearchArgs, ctx: ToolContext) -> str:
        workspace = self.workspace_for(ctx)
        base, info = workspace.stat(args.path)
        flags = re.IGNORECASE if args.ignore_case else 0
        try:
            regex = re.compile(re.escape(args.pattern) if args.fixed else args.pattern, flags)
        except re.error as exc:
            raise ToolError(
                f"the pattern is not a valid regular expression ({exc}); escape special "
                "characters or set fixed=true."
            ) from None
        only = glob_regex(args.glob) if args.glob else None
        grep = _Grep(regex, only, args.max_results)
        if stat.S_ISDIR(info.st_mode):
            await asyncio.to_thread(grep.tree, workspace, args.path)
        else:
            await asyncio.to_thread(grep.file, workspace, args.path)
        if grep.outside:
            # Lines of a file someone sent (or a download) reach the model: outside content.
            untrusted.note_outside(ctx, f"search {', '.join(sorted(grep.outside)[:3])}")
        if not grep.lines:
            return f"no matches for {args.pattern!r} under {base}."
        out = "\n".join(grep.lines)
        if grep.truncated:
            out += f"\n[first {len(grep.lines)} matches shown; narrow the pattern, path or glob]"
        return out

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="glob",
                description=(
                    "List workspace files whose path matches a glob pattern. A pattern without '/' "
                    "matches file names at any depth."
                ),
                args=GlobArgs,
                handler=self.glob_files,
                group=GROUP,
            ),
            ToolSpec(
                name="search",
                description=(
                    "Search file contents in the workspace (like grep). Returns path:line: text "
                    "for each matching line."
                ),
                args=SearchArgs,
                handler=self.search,
                group=GROUP,
            ),
        ]


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over '/'-separated relative paths.

    `*` and `?` stay inside one path segment, `**` spans directories, and a pattern
    without '/' matches the file name at any depth (as in .gitignore).
    """
    pattern = pattern.strip().removeprefix("./")
    if not pattern:
        raise ToolError("the glob pattern is empty; use something like '*.py'.")
    if "/" not in pattern:
        pattern = "**/" + pattern
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = close + 1
            continue
        else:
            out.append(re.escape(char))
        i += 1
    try:
        return re.compile("".join(out) + r"\Z")
    except re.error:
        raise ToolError(f"{pattern!r} is not a valid glob pattern.") from None


def _directory(workspace: Workspace, given: str) -> str:
    rel, info = workspace.stat(given)
    if not stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{given!r} is not a directory in the workspace.")
    return rel


class _Walk:
    """Files under a workspace directory in sorted order, never leaving the workspace through
    a symlink; symlinked files are kept only when they point to a file inside.

    `cut` tells afterwards whether the walk stopped early at its size or time limit.
    """

    def __init__(self, workspace: Workspace, path: str) -> None:
        self.workspace, self.path, self.cut = workspace, path, False

    def __iter__(self) -> Iterator[WalkEntry]:
        deadline = time.monotonic() + WALK_SECONDS
        seen = 0
        for item in self.workspace.walk(self.path, SKIPPED_DIRS.__contains__):
            seen += 1
            if seen > MAX_WALK_ENTRIES or time.monotonic() > deadline:
                self.cut = True
                return
            if item.entry.is_symlink and not self._file_inside(item.rel):
                continue
            yield item

    def _file_inside(self, rel: str) -> bool:
        try:
            _, info = self.workspace.stat(rel)
        except ToolError:
            return False  # points outside, or nowhere
        return stat.S_ISREG(info.st_mode)


def _collect(
    workspace: Workspace, path: str, matcher: re.Pattern[str], cap: int
) -> tuple[list[str], bool]:
    found: list[str] = []
    walk = _Walk(workspace, path)
    for item in walk:
        if matcher.match(item.under):
            if len(found) == cap:
                return found, True
            found.append(item.rel)
    return found, walk.cut


class _Grep:
    """Matching lines as `path:line: text`, up to a cap; hard-linked and binary files are
    skipped in a tree (and refused when named alone)."""

    def __init__(self, regex: re.Pattern[str], only: re.Pattern[str] | None, cap: int) -> None:
        self.regex, self.only, self.cap = regex, only, cap
        self.lines: list[str] = []
        self.truncated = False
        self.outside: set[str] = set()  # files people sent or downloads with matches shown

    def tree(self, workspace: Workspace, path: str) -> None:
        walk = _Walk(workspace, path)
        for item in walk:
            if self.only is not None and not self.only.match(item.under):
                continue
            try:
                with workspace.open_entry(item) as file:
                    data = _small_text(file)
                    real = file.rel  # a symlink's target
            except (ToolError, OSError):
                continue
            if data is not None and not self._add(item.rel, data, real):
                return
        self.truncated = walk.cut

    def file(self, workspace: Workspace, path: str) -> None:
        with workspace.open_file(path, "read") as file:
            if self.only is not None and not self.only.match(file.rel.rsplit("/", 1)[-1]):
                return
            data = _small_text(file)
            rel = file.rel
        if data is not None:
            self._add(rel, data, rel)

    def _add(self, rel: str, data: bytes, real: str) -> bool:
        """Add the file's matches (`real`: its path with symlinks resolved); False once the
        cap is passed."""
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if self.regex.search(line[:MAX_MATCH_LINE_CHARS]):
                if len(self.lines) == self.cap:
                    self.truncated = True
                    return False
                shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " […]"
                self.lines.append(f"{rel}:{number}: {shown}")
                if untrusted.outside_file(real):
                    self.outside.add(real)
        return True


def _small_text(file: OpenFile) -> bytes | None:
    """The file's bytes, or None when it is too big to search or binary."""
    if file.size > MAX_SEARCH_FILE_BYTES:
        return None
    data = file.read(MAX_SEARCH_FILE_BYTES)
    return None if b"\x00" in data[:8192] else data
