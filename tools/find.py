"""Finding things in the workspace: `glob` lists files by pattern, `search` greps their lines.

Both walk the tree without following symlinked directories, list a symlinked file only when it
points inside the workspace, and stop at a cap so a huge tree cannot flood the model.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from gateway.tooling import ToolContext, ToolError, ToolSpec
from tools.args import ToolArgs
from tools.workspace import Workspace

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


def find_tools(workspace: Workspace) -> list[ToolSpec[Any]]:
    async def glob_files(args: GlobArgs, ctx: ToolContext) -> str:
        base = _directory(workspace, args.path)
        matcher = glob_regex(args.pattern)
        found, truncated = await asyncio.to_thread(
            _collect, workspace, base, matcher, MAX_GLOB_RESULTS
        )
        if not found:
            return f"no files match {args.pattern!r} under {workspace.relative(base)}."
        listing = "\n".join(found)
        if truncated:
            listing += f"\n[first {len(found)} shown; narrow the pattern or the path]"
        return listing

    async def search(args: SearchArgs, ctx: ToolContext) -> str:
        base = workspace.resolve(args.path)
        if not base.exists():
            raise ToolError(f"{args.path!r} does not exist. Use a path relative to the workspace.")
        flags = re.IGNORECASE if args.ignore_case else 0
        try:
            regex = re.compile(re.escape(args.pattern) if args.fixed else args.pattern, flags)
        except re.error as exc:
            raise ToolError(
                f"the pattern is not a valid regular expression ({exc}); escape special "
                "characters or set fixed=true."
            ) from None
        only = glob_regex(args.glob) if args.glob else None
        lines, truncated = await asyncio.to_thread(
            _grep, workspace, base, regex, only, args.max_results
        )
        if not lines:
            return f"no matches for {args.pattern!r} under {workspace.relative(base)}."
        out = "\n".join(lines)
        if truncated:
            out += f"\n[first {len(lines)} matches shown; narrow the pattern, path or glob]"
        return out

    return [
        ToolSpec(
            name="glob",
            description=(
                "List workspace files whose path matches a glob pattern. A pattern without '/' "
                "matches file names at any depth."
            ),
            args=GlobArgs,
            handler=glob_files,
            group=GROUP,
        ),
        ToolSpec(
            name="search",
            description=(
                "Search file contents in the workspace (like grep). Returns path:line: text "
                "for each matching line."
            ),
            args=SearchArgs,
            handler=search,
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


def _directory(workspace: Workspace, given: str) -> Path:
    base = workspace.resolve(given)
    if not base.is_dir():
        raise ToolError(f"{given!r} is not a directory in the workspace.")
    return base


class _Walk:
    """Files under `base` in sorted order, never leaving the workspace through a symlink.

    `cut` tells afterwards whether the walk stopped early at its size or time limit.
    """

    def __init__(self, workspace: Workspace, base: Path) -> None:
        self.workspace, self.base, self.cut = workspace, base, False

    def __iter__(self) -> Iterator[Path]:
        if self.base.is_file():
            yield self.base
            return
        deadline = time.monotonic() + WALK_SECONDS
        seen = 0
        for root, dirs, files in os.walk(self.base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(files):
                seen += 1
                if seen > MAX_WALK_ENTRIES or time.monotonic() > deadline:
                    self.cut = True
                    return
                path = Path(root, name)
                if path.is_symlink():
                    target = path.resolve()
                    if not target.is_relative_to(self.workspace.root) or not target.is_file():
                        continue
                yield path


def _collect(
    workspace: Workspace, base: Path, matcher: re.Pattern[str], cap: int
) -> tuple[list[str], bool]:
    found: list[str] = []
    walk = _Walk(workspace, base)
    for path in walk:
        rel = path.relative_to(base).as_posix()
        if matcher.match(rel):
            if len(found) == cap:
                return found, True
            found.append(workspace.relative(path))
    return found, walk.cut


def _grep(
    workspace: Workspace,
    base: Path,
    regex: re.Pattern[str],
    only: re.Pattern[str] | None,
    cap: int,
) -> tuple[list[str], bool]:
    out: list[str] = []
    walk = _Walk(workspace, base)
    for path in walk:
        rel_to_base = path.relative_to(base).as_posix() if path != base else path.name
        if only is not None and not only.match(rel_to_base):
            continue
        try:
            if path.stat().st_size > MAX_SEARCH_FILE_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue  # binary
        rel = workspace.relative(path)
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            if regex.search(line[:MAX_MATCH_LINE_CHARS]):
                if len(out) == cap:
                    return out, True
                shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " […]"
                out.append(f"{rel}:{number}: {shown}")
    return out, walk.cut
