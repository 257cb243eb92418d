"""The person's message as text for the model and for history, and the attachment notes in it.

History keeps a note per attachment (kind, name, type, size and the adapter's handle), never
the bytes: tools find files of this conversation through these notes, and earlier images are
fetched again from them. A line the person typed that looks like a note is defused, so a
note in history always comes from the gateway.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from gateway.approvals.untrusted import wrap
from gateway.llm.types import Message
from gateway.sdk.messages import Attachment, AttachmentKind, ChatKind, Inbound

NOTE_PREFIX = "[attachment:"
VOICE_PREFIX = "[voice message"
_NOTE = re.compile(
    r"^\[attachment: (?P<kind>\w+) (?P<name>.*?) \((?P<mime>[^,()]*)(?:, (?P<size>\d+) bytes)?\)"
    r" file_id=(?P<id>.+)\]$"
)
_NAME_UNSAFE = re.compile(r"[\[\]()\r\n\t]+")
_FORGED = re.compile(r"^(\s*)\[(?=(attachment:|voice message))", re.IGNORECASE | re.MULTILINE)
# What other people's messages around the turn's are called as outside content: the marker's
# source, and the source an approval prompt names.
CONTEXT_SOURCE = "chat messages"


def note(attachment: Attachment) -> str:
    """`[attachment: image photo.jpg (image/jpeg, 1234 bytes) file_id=...]`."""
    name = _NAME_UNSAFE.sub("_", attachment.name or "").strip() or "unnamed"
    mime = _NAME_UNSAFE.sub("_", attachment.mime_type or "unknown type").replace(",", "_")
    size = f", {attachment.size} bytes" if attachment.size else ""
    return (
        f"{NOTE_PREFIX} {attachment.kind.value} {name} ({mime}{size}) file_id={attachment.file_id}]"
    )


def parse_note(line: str) -> Attachment | None:
    match = _NOTE.match(line.strip())
    if match is None:
        return None
    try:
        kind = AttachmentKind(match["kind"])
    except ValueError:
        return None
    mime = match["mime"]
    return Attachment(
        kind=kind,
        file_id=match["id"],
        name=match["name"] if match["name"] != "unnamed" else None,
        size=int(match["size"]) if match["size"] else None,
        mime_type=None if mime == "unknown type" else mime,
    )


def notes_in(message: Message) -> list[Attachment]:
    """The attachments noted in one user message of history."""
    content = message.get("content")
    if message.get("role") != "user" or not isinstance(content, str) or NOTE_PREFIX not in content:
        return []
    found = (parse_note(line) for line in content.splitlines() if line.startswith(NOTE_PREFIX))
    return [attachment for attachment in found if attachment is not None]


def find_attachment(
    file_id: str, current: Iterable[Attachment], history: Sequence[Message]
) -> Attachment | None:
    """The attachment with this handle from the current message or this conversation's
    history; None when it was never sent here (so no handle from elsewhere is fetched)."""
    for attachment in current:
        if attachment.file_id == file_id:
            return attachment
    for message in reversed(history):
        for attachment in notes_in(message):
            if attachment.file_id == file_id:
                return attachment
    return None


def recent_images(history: Sequence[Message], turns: int) -> list[Attachment]:
    """Images noted in the last `turns` user messages, newest first."""
    found: list[Attachment] = []
    seen = 0
    for message in reversed(history):
        if message.get("role") != "user":
            continue
        seen += 1
        if seen > turns:
            break
        images = [a for a in notes_in(message) if a.kind is AttachmentKind.IMAGE]
        found.extend(reversed(images))
    return found


def defuse(text: str) -> str:
    """The person's text with lines that imitate the gateway's notes made harmless."""
    return _FORGED.sub(r"\1(", text)


def user_text(inbound: Inbound, context_lines: Sequence[str] = ()) -> str:
    """The message as the model reads it: recent group context, then the text (with its
    author in groups); attachment notes are added by the caller."""
    parts: list[str] = []
    if context_lines:
        # Other people's words: material to read, marked as outside content.
        lines = wrap(CONTEXT_SOURCE, defuse("\n".join(context_lines)))
        parts.append(f"[Recent messages in this chat, for context]\n{lines}")
    text = defuse(inbound.text)
    if inbound.chat.kind is not ChatKind.DIRECT:
        text = f"{inbound.sender.label}: {text}"
    parts.append(text)
    return "\n\n".join(parts)


def user_content(inbound: Inbound, context_lines: Sequence[str] = ()) -> str:
    """The text and a note per attachment: what history keeps of the person's message."""
    parts = [user_text(inbound, context_lines), *(note(a) for a in inbound.attachments)]
    return "\n\n".join(parts)
