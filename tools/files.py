"""File tools scoped to the workspace: read_file and write_file."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from gateway.tooling import ToolContext, ToolError, ToolSpec
from tools.workspace import Workspace

GROUP = "fs"
MAX_READ_BYTES = 10 * 1024 * 1024  # never pull more than this into memory at once
DEFAULT_LINE_LIMIT = 400


class ReadFileArgs(BaseModel):
    path: str = Field(description="File path relative to the workspace.")
    offset: int = Field(default=1, ge=1, description="First line to read (1-based).")
    limit: int = Field(default=DEFAULT_LINE_LIMIT, ge=1, le=5000, description="How many lines.")


class WriteFileArgs(BaseModel):
    path: str = Field(description="File path relative to the workspace; parents are created.")
    content: str = Field(description="The full new content of the file.")


def file_tools(workspace: Workspace, *, max_chars: int = 16000) -> list[ToolSpec[Any]]:
    async def read_file(args: ReadFileArgs, ctx: ToolContext) -> str:
        path = workspace.resolve(args.path)
        if not path.exists():
            raise ToolError(f"{args.path!r} does not exist. Use a path relative to the workspace.")
        if path.is_dir():
            entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
            raise ToolError(f"{args.path!r} is a directory. It contains: {', '.join(entries[:50])}")
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(min(size, MAX_READ_BYTES))
        if b"\x00" in head[:8192]:
            return f"{args.path} is a binary file ({size:,} bytes); it cannot be shown as text."
        text = head.decode("utf-8", errors="replace")
        lines = text.splitlines()
        chunk = lines[args.offset - 1 : args.offset - 1 + args.limit]
        body = "\n".join(f"{args.offset + i:>6}\t{line}" for i, line in enumerate(chunk))
        if len(body) > max_chars:
            body = body[:max_chars] + "\n[... cut: line too long; read fewer lines]"
        shown_to = args.offset - 1 + len(chunk)
        more = ""
        if shown_to < len(lines) or size > MAX_READ_BYTES:
            more = f"\n[lines {args.offset}-{shown_to} of {len(lines)}; use offset={shown_to + 1}]"
        if not chunk:
            return f"{args.path} has {len(lines)} lines; nothing at offset {args.offset}."
        return body + more

    async def write_file(args: WriteFileArgs, ctx: ToolContext) -> str:
        path = workspace.resolve(args.path)
        if path.is_dir():
            raise ToolError(f"{args.path!r} is a directory; give a file path.")
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(args.content, encoding="utf-8")
        verb = "overwrote" if existed else "created"
        return f"{verb} {workspace.relative(path)} ({len(args.content.encode()):,} bytes)"

    return [
        ToolSpec(
            name="read_file",
            description=(
                "Read a text file from the workspace. Returns numbered lines; for long files "
                "read in pages with offset and limit."
            ),
            args=ReadFileArgs,
            handler=read_file,
            group=GROUP,
        ),
        ToolSpec(
            name="write_file",
            description="Create or overwrite a text file in the workspace with the given content.",
            args=WriteFileArgs,
            handler=write_file,
            group=GROUP,
        ),
    ]
