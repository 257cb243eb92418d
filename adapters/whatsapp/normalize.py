"""WhatsApp webhook payloads turned into the core's messages, presses and status updates.

Pure functions over the JSON Meta sends (request_check.py has checked its shape first), so
they are tested without a network. A WhatsApp conversation is a direct chat whose id is the
person's wa id (their number, country code first).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.sdk import (
    Attachment,
    AttachmentKind,
    ButtonPress,
    ChatKind,
    ChatRef,
    Inbound,
    SentRef,
    UserRef,
)

PLATFORM = "whatsapp"
Payload = Mapping[str, Any]

# Message types that carry a file: the object under the type's name has its media id.
MEDIA_TYPES = {
    "image": AttachmentKind.IMAGE,
    "audio": AttachmentKind.AUDIO,
    "video": AttachmentKind.VIDEO,
    "document": AttachmentKind.DOCUMENT,
    "sticker": AttachmentKind.IMAGE,
}


@dataclass(frozen=True)
class Received:
    """A message someone sent: what goes to the core, and when WhatsApp says it was sent."""

    inbound: Inbound
    number: str
    at: float


@dataclass(frozen=True)
class StatusUpdate:
    """What became of a message the bot sent: sent, delivered, read or failed."""

    message_id: str
    status: str
    recipient: str
    errors: tuple[tuple[int, str], ...] = field(default=())  # (code, title) of a failure


@dataclass(frozen=True)
class WebhookContent:
    messages: list[Received] = field(default_factory=list)
    presses: list[ButtonPress] = field(default_factory=list)
    statuses: list[StatusUpdate] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # types not handled, for the log


def direct_chat(number: str) -> ChatRef:
    return ChatRef(platform=PLATFORM, chat_id=number, kind=ChatKind.DIRECT)


def read_webhook(body: Payload, phone_number_id: str) -> WebhookContent:
    """Everything in one webhook POST addressed to our business number (others are skipped:
    one app may serve several numbers)."""
    content = WebhookContent()
    for value in _values(body):
        metadata: Payload = value.get("metadata") or {}
        if str(metadata.get("phone_number_id", "")) != phone_number_id:
            content.skipped.append("another number")
            continue
        names = {
            str(c.get("wa_id")): str((c.get("profile") or {}).get("name") or "")
            for c in value.get("contacts") or ()
        }
        for message in value.get("messages") or ():
            _read_message(message, names, content)
        for status in value.get("statuses") or ():
            content.statuses.append(status_update(status))
    return content


def _values(body: Payload) -> Iterator[Payload]:
    for entry in body.get("entry") or ():
        for change in entry.get("changes") or ():
            if change.get("field") == "messages" and isinstance(change.get("value"), dict):
                yield change["value"]


def _read_message(message: Payload, names: Mapping[str, str], content: WebhookContent) -> None:
    number = str(message["from"])
    kind = str(message.get("type") or "")
    sender = UserRef(platform=PLATFORM, user_id=number, display_name=names.get(number) or None)
    chat = direct_chat(number)
    context: Payload = message.get("context") or {}
    at = _timestamp(message.get("timestamp"))
    if kind == "interactive":
        press = _press(message, sender, chat, context)
        if press is not None:
            content.presses.append(press)
            return
    text = message_text(message)
    attachments = media_attachments(message)
    if not text and not attachments:
        content.skipped.append(kind or "untyped")
        return
    content.messages.append(
        Received(
            inbound=Inbound(
                event_id=str(message["id"]),
                chat=chat,
                sender=sender,
                text=text,
                message_id=str(message["id"]),
                mentioned=True,
                attachments=attachments,
            ),
            number=number,
            at=at,
        )
    )


def message_text(message: Payload) -> str:
    """The text the agent reads: a body, a caption, a tapped template button or a reaction;
    a reply to an earlier message says which (WhatsApp sends only the quoted id)."""
    kind = message.get("type")
    part: Payload = message.get(str(kind)) or {}
    if kind == "text":
        text = str(part.get("body") or "")
    elif kind in MEDIA_TYPES:
        text = str(part.get("caption") or "")
    elif kind == "button":  # a quick-reply button of a template message
        text = str(part.get("text") or part.get("payload") or "")
    elif kind == "reaction":
        emoji = str(part.get("emoji") or "")
        # A removed reaction (no emoji) says nothing to answer.
        text = f"[reacted {emoji} to message {part.get('message_id', '')}]" if emoji else ""
    elif kind == "interactive":  # a list or button reply that is not one of our presses
        reply: Payload = part.get("button_reply") or part.get("list_reply") or {}
        text = str(reply.get("title") or "")
    elif kind == "location":
        text = f"[location {part.get('latitude')},{part.get('longitude')} {part.get('name') or ''}]"
    else:
        text = ""
    quoted = (message.get("context") or {}).get("id")
    if text and quoted and kind not in ("reaction", "interactive"):
        text = f"[in reply to message {quoted}]\n{text}"
    return text.strip()


def media_attachments(message: Payload) -> tuple[Attachment, ...]:
    """A file in the message as an Attachment whose handle is the WhatsApp media id; a voice
    note (audio recorded in WhatsApp) is VOICE."""
    kind = str(message.get("type") or "")
    if kind not in MEDIA_TYPES:
        return ()
    media: Payload = message.get(kind) or {}
    if not media.get("id"):
        return ()
    mime = str(media.get("mime_type") or "").split(";", 1)[0].strip()
    attachment_kind = MEDIA_TYPES[kind]
    if kind == "audio" and media.get("voice"):
        attachment_kind = AttachmentKind.VOICE
    return (
        Attachment(
            kind=attachment_kind,
            file_id=str(media["id"]),
            name=media.get("filename") or None,
            mime_type=mime or None,
        ),
    )


def _press(
    message: Payload, sender: UserRef, chat: ChatRef, context: Payload
) -> ButtonPress | None:
    """A reply button or list row we sent, pressed: its id is the button's data."""
    interactive: Payload = message.get("interactive") or {}
    reply: Payload = interactive.get("button_reply") or interactive.get("list_reply") or {}
    data = reply.get("id")
    if not isinstance(data, str) or not data:
        return None
    quoted = context.get("id")
    return ButtonPress(
        event_id=str(message["id"]),
        chat=chat,
        user=sender,
        data=data,
        message=SentRef(chat=chat, message_id=str(quoted)) if quoted else None,
    )


def status_update(status: Payload) -> StatusUpdate:
    errors = tuple(
        (int(e.get("code") or 0), str(e.get("title") or e.get("message") or ""))
        for e in status.get("errors") or ()
        if isinstance(e, dict)
    )
    return StatusUpdate(
        message_id=str(status["id"]),
        status=str(status["status"]),
        recipient=str(status.get("recipient_id") or ""),
        errors=errors,
    )


def _timestamp(value: Any) -> float:
    """When the person sent it (WhatsApp's seconds), never later than now: the window is
    counted from it; a missing or odd value counts as now."""
    now = time.time()
    try:
        sent = float(value)
    except (TypeError, ValueError, OverflowError):
        return now
    return sent if 0 < sent <= now else now
