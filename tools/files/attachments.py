"""save_attachment: copy a file the person sent in this conversation into its workspace.

Only file ids that appear in this session's own messages can be fetched, so the model
cannot pull files from other chats by guessing or being told an id. The file's type is
sniffed from its bytes and its name is made one safe path component. Files are saved under
`attachments/`, and what read_file reads from there reaches the model marked as outside
content (gateway/approvals/untrusted.py).
"""

from __future__ import annotations

import posixpath
from typing import Any

from pydantic import Field

from gateway.sdk import (
    Attachment,
    AttachmentError,
    Outbox,
    SessionStore,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
)
from gateway.sdk.media import fetch, find_attachment, safe_name, sniff
from tools.args import ToolArgs
from tools.files.workspace import WorkspaceFor

GROUP = "fs"
FOLDER = "attachments"


class SaveAttachmentArgs(ToolArgs):
    file_id: str = Field(description="The file_id shown in the [attachment: ...] note.")
    path: str = Field(
        default="", description="Name inside attachments/ (default: the file's own name)."
    )


class AttachmentFetcher:
    """Fetches files of this conversation (and only those) through their platform."""

    def __init__(self, outbox: Outbox, sessions: SessionStore, *, max_bytes: int) -> None:
        self._outbox = outbox
        self._sessions = sessions
        self.max_bytes = max_bytes

    async def find(self, file_id: str, ctx: ToolContext) -> Attachment:
        found = find_attachment(file_id, ctx.attachments, ())
        if found is None:
            history = (await self._sessions.load(ctx.session)).messages
            found = find_attachment(file_id, (), history)
        if found is None:
            raise ToolError(
                f"no attachment with file_id {file_id!r} was sent in this conversation."
            )
        return found

    async def fetch(self, attachment: Attachment, ctx: ToolContext) -> bytes:
        try:
            return await fetch(self._outbox, ctx.chat, attachment, self.max_bytes)
        except AttachmentError as exc:
            raise ToolError(f"the attachment could not be fetched: {exc}") from None


class AttachmentTools(ToolFamily):
    """save_attachment: files people sent in the conversation, copied into its workspace."""

    name = "attachments"

    def __init__(self, workspace_for: WorkspaceFor, fetcher: AttachmentFetcher) -> None:
        self.workspace_for = workspace_for
        self.fetcher = fetcher

    async def save_attachment(self, args: SaveAttachmentArgs, ctx: ToolContext) -> str:
        attachment = await self.fetcher.find(args.file_id, ctx)
        data = await self.fetcher.fetch(attachment, ctx)
        mime = sniff(data)
        name = safe_name(attachment.name, mime, fallback="attachment")
        rel, _ = self.workspace_for(ctx).write_bytes(_inside_folder(args.path or name), data)
        return f"saved {rel} ({mime}, {len(data):,} bytes)"

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="save_attachment",
                description=(
                    "Save a file the person sent (see the [attachment: ...] notes) into the "
                    "workspace, to read or process it with the other tools."
                ),
                args=SaveAttachmentArgs,
                handler=self.save_attachment,
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
