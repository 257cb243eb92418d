"""File tools scoped to the workspace: read_file, write_file and edit_file."""

from __future__ import annotations

import asyncio
import difflib
import stat
from typing import Any

from pydantic import Field

from gateway.sdk import (
    ApprovalNeed,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
    inline_code,
    untrusted,
)
from gateway.sdk.media import DocumentError, document_kind, extract
from tools.args import ToolArgs
from tools.files.workspace import OpenFile, Workspace, WorkspaceFor

GROUP = "fs"
MAX_READ_BYTES = 10 * 1024 * 1024  # never pull more than this into memory at once
MAX_EDIT_BYTES = 5 * 1024 * 1024  # edits rewrite the whole file; keep that cheap
DEFAULT_LINE_LIMIT = 400
_SNIFF_BYTES = 8192
# Binary documents read_file shows as their text (CSV and HTML are text already).
_DOCUMENTS = frozenset({"pdf", "docx", "xlsx", "pptx", "odt"})


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the workspace.")
    offset: int = Field(default=1, ge=1, description="First line to read (1-based).")
    limit: int = Field(default=DEFAULT_LINE_LIMIT, ge=1, le=5000, description="How many lines.")


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the workspace; parents are created.")
    content: str = Field(description="The full new content of the file.")


class EditFileArgs(ToolArgs):
    path: str = Field(description="File path relative to the workspace.")
    old_text: str = Field(description="Exact text to replace, including spaces and indentation.")
    new_text: str = Field(description="The replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class FileTools(ToolFamily):
    """read_file, write_file and edit_file on the workspace of the chat a call runs in."""

    name = "files"

    def __init__(
        self,
        workspace_for: WorkspaceFor,
        *,
        max_chars: int = 16000,
        confirm_overwrite: bool = False,
        document_chars: tuple[int, int] = (40_000, 8_000),
    ) -> None:
        self.workspace_for = workspace_for
        self.max_chars = max_chars
        self.confirm_overwrite = confirm_overwrite
        # Text read from a PDF, DOCX, XLSX, PPTX or ODT: per file, per page (media settings).
        self.document_chars = document_chars

    async def overwrite_approval(
        self, args: WriteFileArgs, ctx: ToolContext
    ) -> ApprovalNeed | None:
        # Opt-in (tools.confirm_overwrite): replacing a file someone relies on is destructive.
        if not self.confirm_overwrite:
            return None
        try:
            rel, info = self.workspace_for(ctx).stat(args.path)
        except ToolError:
            return None  # missing (a create), or refused: the handler says why
        if not stat.S_ISREG(info.st_mode):
            return None
        return ApprovalNeed(
            summary=f"overwrite {rel} ({info.st_size:,} bytes) with "
            f"{len(args.content.encode()):,} bytes of new content",
            reason="it replaces an existing file",
            shape=f"write_file {rel}",
            cwd=".",
        )

    def sent_by_someone(self, args: ReadFileArgs, ctx: ToolContext) -> bool:
        """A file people sent (attachments/) or the browser downloaded (downloads/) is outside
        content, whatever path (a symlink...) leads to it."""
        workspace = self.workspace_for(ctx)
        try:
            return untrusted.outside_file(workspace.relative(workspace.resolve(args.path)))
        except ToolError:
            return False

    async def read_file(self, args: ReadFileArgs, ctx: ToolContext) -> str:
        workspace = self.workspace_for(ctx)
        _refuse_directory(workspace, args.path)
        with workspace.open_file(args.path, "read") as file:
            size = file.size
            head = file.read(min(size, MAX_READ_BYTES))
        kind = document_kind(args.path, None, head)
        if kind in _DOCUMENTS:
            if size > MAX_READ_BYTES:
                return f"{args.path} has {size:,} bytes; documents over that are not read."
            text = await self._document_text(head, kind, args.path)
        elif b"\x00" in head[:_SNIFF_BYTES]:
            return f"{args.path} is a binary file ({size:,} bytes); it cannot be shown as text."
        else:
            text = head.decode("utf-8", errors="replace")
        lines = text.splitlines()
        chunk = lines[args.offset - 1 : args.offset - 1 + args.limit]
        if not chunk:
            return f"{args.path} has {len(lines)} lines; nothing at offset {args.offset}."
        body = "\n".join(f"{args.offset + i:>6}\t{line}" for i, line in enumerate(chunk))
        if len(body) > self.max_chars:
            body = body[: self.max_chars] + "\n[... cut: line too long; read fewer lines]"
        shown_to = args.offset - 1 + len(chunk)
        more = ""
        if shown_to < len(lines) or size > MAX_READ_BYTES:
            more = f"\n[lines {args.offset}-{shown_to} of {len(lines)}; use offset={shown_to + 1}]"
        return body + more

    async def _document_text(self, data: bytes, kind: str, path: str) -> str:
        most, per_page = self.document_chars
        try:
            document = await asyncio.to_thread(
                extract, data, kind, max_chars=most, max_page_chars=per_page
            )
        except DocumentError as exc:
            raise ToolError(f"{path}: {exc}.") from None
        summary = document.summary(path.rsplit("/", 1)[-1])
        return f"{summary}\n{document.text}" if document.text else summary

    async def write_file(self, args: WriteFileArgs, ctx: ToolContext) -> str:
        rel, created = self.workspace_for(ctx).write_bytes(args.path, args.content.encode("utf-8"))
        verb = "created" if created else "overwrote"
        return f"{verb} {rel} ({len(args.content.encode()):,} bytes)"

    async def edit_file(self, args: EditFileArgs, ctx: ToolContext) -> str:
        old, new = args.old_text, args.new_text
        if not old:
            raise ToolError("old_text is empty; to create or overwrite a file use write_file.")
        workspace = self.workspace_for(ctx)
        _refuse_directory(workspace, args.path)
        # One open for the read and the write, so the file edited is the file read.
        with workspace.open_file(args.path, "edit") as file:
            text = _editable_text(file, args.path)
            if old not in text and "\r\n" in text:
                # The model writes "\n"; a CRLF file needs the same text with "\r\n".
                old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            count = text.count(old)
            if count == 0:
                raise ToolError(_not_found(text, args.old_text, args.path))
            first_line = text[: text.index(old)].count("\n") + 1
            if count > 1 and not args.replace_all:
                raise ToolError(
                    f"old_text appears {count} times in {args.path} (lines "
                    f"{_match_lines(text, old)}). Include more surrounding lines to make it "
                    "unique, or set replace_all=true."
                )
            file.replace(text.replace(old, new).encode("utf-8"))
            rel = file.rel
        if count == 1:
            return f"edited {rel}: replaced 1 occurrence at line {first_line}."
        return f"edited {rel}: replaced {count} occurrences (lines {_match_lines(text, old)})."

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="read_file",
                description=(
                    "Read a text file from the workspace, or the text of a PDF, Word, Excel, "
                    "PowerPoint or OpenDocument file. Returns numbered lines; for long files "
                    "read in pages with offset and limit."
                ),
                args=ReadFileArgs,
                handler=self.read_file,
                group=GROUP,
                untrusted_output=self.sent_by_someone,
                progress=lambda args: f"Reading {inline_code(args.path)}",
            ),
            ToolSpec(
                name="write_file",
                description=(
                    "Create or overwrite a text file in the workspace with the given content."
                ),
                args=WriteFileArgs,
                handler=self.write_file,
                group=GROUP,
                approval=self.overwrite_approval,
                side_effects=True,
                progress=lambda args: f"Writing {inline_code(args.path)}",
            ),
            ToolSpec(
                name="edit_file",
                description=(
                    "Change a file by replacing exact text. old_text must match the file exactly "
                    "(copy it from read_file, without the line numbers) and be unique unless "
                    "replace_all is set."
                ),
                args=EditFileArgs,
                handler=self.edit_file,
                group=GROUP,
                side_effects=True,
                progress=lambda args: f"Editing {inline_code(args.path)}",
            ),
        ]


def _refuse_directory(workspace: Workspace, given: str) -> None:
    """A directory named where a file was expected: say what it holds, so the model can pick."""
    try:
        _, info = workspace.stat(given)
    except ToolError:
        return  # opening the file gives the precise reason
    if stat.S_ISDIR(info.st_mode):
        entries = workspace.listdir(given)
        raise ToolError(f"{given!r} is a directory. It contains: {', '.join(entries[:50])}")


def _editable_text(file: OpenFile, given: str) -> str:
    if file.size > MAX_EDIT_BYTES:
        raise ToolError(
            f"{given} is too large to edit ({file.size:,} bytes; the limit is {MAX_EDIT_BYTES:,})."
        )
    data = file.read(MAX_EDIT_BYTES + 1)
    if len(data) > MAX_EDIT_BYTES:  # it grew since it was opened
        raise ToolError(f"{given} is too large to edit (over {MAX_EDIT_BYTES:,} bytes).")
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise ToolError(f"{given} is a binary file; edit_file only changes text files.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{given} is not UTF-8 text; edit_file cannot change it.") from None


def _match_lines(text: str, old: str, limit: int = 10) -> str:
    lines: list[str] = []
    start = 0
    while (at := text.find(old, start)) != -1 and len(lines) < limit:
        lines.append(str(text.count("\n", 0, at) + 1))
        start = at + len(old)
    return ", ".join(lines)


def _not_found(text: str, old: str, given: str) -> str:
    """Why old_text did not match, with the file's closest lines so the model can retry."""
    lines = text.splitlines()
    wanted = [line for line in old.splitlines() if line.strip()] or [old]
    hint = "Copy the exact text from read_file (without line numbers) and try again."
    if _squash(old) and _squash(old) in _squash(text):
        hint = "It matches if spaces are ignored: copy the exact indentation and spacing."
    anchor = _closest_line(lines, wanted[0])
    if anchor is None:
        return f"old_text was not found in {given}, and no line is similar to it. {hint}"
    start = max(anchor - 1, 0)
    end = min(start + len(old.splitlines()) + 2, len(lines))
    shown = "\n".join(f"{n + 1:>6}\t{lines[n]}" for n in range(start, end))
    return f"old_text was not found in {given}. The closest lines are:\n{shown}\n{hint}"


def _closest_line(lines: list[str], target: str) -> int | None:
    goal = target.strip()
    best, best_ratio = None, 0.55  # below this a "closest" line only misleads
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(goal)
    for number, line in enumerate(lines[:50_000]):
        matcher.set_seq1(line.strip())
        if matcher.real_quick_ratio() <= best_ratio or matcher.quick_ratio() <= best_ratio:
            continue
        ratio = matcher.ratio()
        if ratio > best_ratio:
            best, best_ratio = number, ratio
    return best


def _squash(text: str) -> str:
    return "".join(text.split())
