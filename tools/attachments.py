"""save_attachment: copy a file the person sent in this conversation into its workspace.

Only file ids that appear in this session's own messages can be fetched, so the model
cannot pull files from other chats by guessing or being told an id. Files are saved under
`attachments/`, and what read_file reads from there reaches the model marked as outside
content (gateway/untrusted.py).
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

from pydantic import Field

from gateway.channels import AttachmentError, FileSource, Outbox
from gateway.history import SessionStore
from gateway.tooling import ToolContext, ToolError, ToolSpec
from tools.args import ToolArgs
from tools.workspace import WorkspaceFor

GROUP = "fs"
FOLDER = "attachments"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SaveAttachmentArgs(ToolArgs):
    file_id: str = Field(description="The file_id shown in the [attachment: ...] note.")
    path: str = Field(
        default="", description="Name inside attachments/ (default: the file's own name)."
    )


def attachment_tools(
    workspace_for: WorkspaceFor, outbox: Outbox, sessions: SessionStore, *, max_bytes: int
) -> list[ToolSpec[Any]]:
    async def save(args: SaveAttachmentArgs, ctx: ToolContext) -> str:
        name = next((a.name for a in ctx.attachments if a.file_id == args.file_id), None)
        if name is None:
            note = _attachment_note((await sessions.load(ctx.session)).messages, args.file_id)
            if note is None:
                raise ToolError(
                    f"no attachment with file_id {args.file_id!r} was sent in this conversation."
                )
            name = _name_in_note(note)
        source = outbox.adapter(ctx.chat.platform) if outbox.has(ctx.chat.platform) else None
        if not isinstance(source, FileSource):
            raise ToolError(f"attachments from {ctx.chat.platform} cannot be fetched yet.")
        try:
            data = await source.download(args.file_id, max_bytes)
        except AttachmentError as exc:
            raise ToolError(f"the attachment could not be fetched: {exc}") from None
        safe = _UNSAFE.sub("_", name or args.file_id).strip("._") or "attachment"
        rel, _ = workspace_for(ctx).write_bytes(_inside_folder(args.path or safe), data)
        return f"saved {rel} ({len(data):,} bytes)"

    return [
        ToolSpec(
            name="save_attachment",
            description=(
                "Save a file the person sent (see the [attachment: ...] notes) into the "
                "workspace, to read or process it with the other tools."
            ),
            args=SaveAttachmentArgs,
            handler=save,
            group=GROUP,
        )
    ]


def _inside_folder(path: str) -> str:
    """Files people sent stay under attachments/, so what is read from there is known."""
    path = posixpath.normpath("/" + path).lstrip("/")  # no way out with ../
    return path if received_file(path) else f"{FOLDER}/{path}"


def received_file(rel: str) -> bool:
    """Is `rel` (relative to the workspace, resolved) under the folder of files people sent?"""
    return rel.split("/", 1)[0] == FOLDER


def _attachment_note(messages: list[dict[str, Any]], file_id: str) -> str | None:
    """The [attachment: ...] line naming this file id in the person's messages, if any."""
    marker = f"file_id={file_id}]"
    for message in messages:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str) and marker in content:
            for line in content.splitlines():
                if line.startswith("[attachment:") and line.endswith(marker):
                    return line
    return None


def _name_in_note(note: str) -> str | None:
    # "[attachment: document notes.pdf (application/pdf, 1234 bytes) file_id=doc-1]"
    words = note.removeprefix("[attachment:").split("(", 1)[0].split()
    return words[1] if len(words) > 1 else None
