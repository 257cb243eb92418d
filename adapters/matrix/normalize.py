"""Matrix room events (their decrypted JSON) as chatgate's Inbound, and nothing else.

Deliberate choices: edits (`m.replace`), notices and events from the bot itself are ignored
(an edit would answer the same question twice; notices are what bots send each other); a
reply's fallback quote (`> <@user> ...` lines and `<mx-reply>`) is cut so the model sees
what was written; a message in an `m.thread` belongs to that thread's own session.
"""

from __future__ import annotations

import base64
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from gateway.sdk import Attachment, AttachmentKind, ChatKind, ChatRef, Inbound, UserRef
from gateway.sdk.media import declared_kind

PLATFORM = "matrix"
ENCRYPTED_FILE = "enc:"  # a file_id that carries the key of an encrypted attachment
_MEDIA = {
    "m.image": AttachmentKind.IMAGE,
    "m.audio": AttachmentKind.AUDIO,
    "m.video": AttachmentKind.VIDEO,
    "m.file": AttachmentKind.DOCUMENT,
}
_REPLY_FALLBACK = re.compile(r"\A(?:>.*\n)+\n?")


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is: its user id and the names people address it by in rooms."""

    user_id: str
    display_name: str = ""

    @property
    def localpart(self) -> str:
        return self.user_id[1:].split(":", 1)[0]

    def named_in(self, text: str) -> bool:
        lowered = text.lower()
        names = (self.user_id, self.display_name, self.localpart)
        return any(
            re.search(rf"(?<![\w@]){re.escape(name.lower())}(?![\w-])", lowered)
            for name in names
            if name
        )


@dataclass(frozen=True)
class Relation:
    """Where an event points: the thread it is in and the event it replies to."""

    thread_root: str | None = None
    reply_to: str | None = None
    replaces: str | None = None


def relation_of(content: dict[str, Any]) -> Relation:
    relates = content.get("m.relates_to")
    if not isinstance(relates, dict):
        return Relation()
    rel_type = relates.get("rel_type")
    target = relates.get("event_id") if isinstance(relates.get("event_id"), str) else None
    in_reply = relates.get("m.in_reply_to")
    reply_to = in_reply.get("event_id") if isinstance(in_reply, dict) else None
    if rel_type == "m.thread":
        # A thread message's m.in_reply_to is only a fallback for older clients unless it
        # is flagged as a real reply.
        real_reply = relates.get("is_falling_back") is False
        return Relation(thread_root=target, reply_to=reply_to if real_reply else None)
    if rel_type == "m.replace":
        return Relation(replaces=target)
    return Relation(reply_to=reply_to if isinstance(reply_to, str) else None)


def chat_ref(room_id: str, *, direct: bool, thread_root: str | None = None) -> ChatRef:
    return ChatRef(
        platform=PLATFORM,
        chat_id=room_id,
        thread_id=thread_root,
        kind=ChatKind.DIRECT if direct else ChatKind.GROUP,
    )


def inbound_from(
    event: dict[str, Any],
    room_id: str,
    me: BotIdentity,
    *,
    direct: bool,
    sender_name: str | None = None,
    replied_to_bot: bool = False,
) -> Inbound | None:
    """The Inbound for a person's message event, or None when the event is not one to handle."""
    if event.get("type") != "m.room.message" or event.get("sender") == me.user_id:
        return None
    content = event.get("content")
    sender, event_id = event.get("sender"), event.get("event_id")
    if (
        not isinstance(content, dict)
        or not isinstance(sender, str)
        or not isinstance(event_id, str)
    ):
        return None
    relation = relation_of(content)
    msgtype = content.get("msgtype")
    if relation.replaces or msgtype not in ("m.text", "m.emote", *_MEDIA):
        return None
    body = content.get("body") if isinstance(content.get("body"), str) else ""
    attachments: tuple[Attachment, ...] = ()
    text = _without_reply_fallback(str(body)) if relation.reply_to else str(body)
    if msgtype in _MEDIA:
        attachment = attachment_of(content, msgtype)
        if attachment is None:
            return None
        attachments = (attachment,)
        # The body of a file message is its name unless a caption was given (`filename`).
        caption = content.get("filename") and content.get("filename") != body
        text = str(body) if caption else ""
    if msgtype == "m.emote":
        text = f"* {text}"
    if not text.strip() and not attachments:
        return None
    chat = chat_ref(room_id, direct=direct, thread_root=relation.thread_root)
    mentioned = direct or replied_to_bot or text.startswith("/") or _mentions(content, text, me)
    return Inbound(
        event_id=event_id,
        chat=chat,
        sender=UserRef(platform=PLATFORM, user_id=sender, display_name=sender_name or None),
        text=text,
        message_id=event_id,
        mentioned=mentioned,
        attachments=attachments,
        received_at=_timestamp(event),
    )


def attachment_of(content: dict[str, Any], msgtype: str) -> Attachment | None:
    info = content.get("info") if isinstance(content.get("info"), dict) else {}
    assert isinstance(info, dict)
    mime = info.get("mimetype") if isinstance(info.get("mimetype"), str) else None
    size = info.get("size") if isinstance(info.get("size"), int) else None
    kind = _MEDIA[msgtype]
    if kind is AttachmentKind.DOCUMENT:
        kind = declared_kind(mime) if mime else AttachmentKind.DOCUMENT
    # MSC3245: a voice message is an m.audio with this marker.
    if msgtype == "m.audio" and "org.matrix.msc3245.voice" in content:
        kind = AttachmentKind.VOICE
    file_id = _file_id(content)
    if file_id is None:
        return None
    name = content.get("filename") or content.get("body")
    return Attachment(
        kind=kind,
        file_id=file_id,
        name=str(name) if name else None,
        size=size,
        mime_type=mime,
    )


@dataclass(frozen=True)
class EncryptedFile:
    """What decrypting an attachment needs (the `file` object of an encrypted room's event)."""

    url: str
    key: str
    iv: str
    sha256: str

    def pack(self) -> str:
        raw = json.dumps([self.url, self.key, self.iv, self.sha256], separators=(",", ":"))
        return ENCRYPTED_FILE + base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def unpack(cls, file_id: str) -> EncryptedFile:
        raw = base64.urlsafe_b64decode(file_id.removeprefix(ENCRYPTED_FILE).encode())
        url, key, iv, sha256 = json.loads(raw)
        return cls(str(url), str(key), str(iv), str(sha256))


def _file_id(content: dict[str, Any]) -> str | None:
    url = content.get("url")
    if isinstance(url, str) and url.startswith("mxc://"):
        return url
    file = content.get("file")
    if not isinstance(file, dict):
        return None
    try:
        encrypted = EncryptedFile(
            url=file["url"], key=file["key"]["k"], iv=file["iv"], sha256=file["hashes"]["sha256"]
        )
    except (KeyError, TypeError):
        return None
    if not all(isinstance(v, str) for v in vars(encrypted).values()):
        return None
    return encrypted.pack() if encrypted.url.startswith("mxc://") else None


def _mentions(content: dict[str, Any], text: str, me: BotIdentity) -> bool:
    # Intentional mentions (Matrix 1.7): clients that send them list exactly who is meant.
    mentions = content.get("m.mentions")
    if isinstance(mentions, dict):
        users = mentions.get("user_ids")
        if isinstance(users, list) and me.user_id in users:
            return True
    formatted = content.get("formatted_body")
    if isinstance(formatted, str) and f"matrix.to/#/{me.user_id}" in formatted:
        return True
    return me.named_in(text)


def _without_reply_fallback(body: str) -> str:
    return _REPLY_FALLBACK.sub("", body, count=1)


def _timestamp(event: dict[str, Any]) -> float:
    stamp = event.get("origin_server_ts")
    return stamp / 1000 if isinstance(stamp, int) and stamp > 0 else time.time()
