"""python-telegram-bot updates as chatgate's Inbound and ButtonPress, and nothing else.

Deliberate choices: channel posts and messages from bots are ignored; an edited message
becomes an Inbound with `edit_of` (admission replaces the stored one while no turn has used
it, and lets it follow as a message of its own after), unless it is a command; a command
for another bot (`/help@other_bot`) is ignored; `/cmd@this_bot` becomes `/cmd`. Only forum
topics (`is_topic_message`) are threads: in an ordinary supergroup `message_thread_id` marks
a reply chain, not a topic.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from telegram import Chat, Message, MessageEntity, Update, User
from telegram.constants import ChatType

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
from gateway.sdk.media import declared_kind, extension_for

PLATFORM = "telegram"
_QUOTE_CHARS = 300  # of a replied-to message shown to the model
_LEADING_MENTION_TAIL = re.compile(r"^[\s,:;]+")


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is, from getMe: needed to tell mentions and replies to it."""

    id: int
    username: str  # without "@", lower case
    # The gateway's command names: in a group, a bare `/status` that Telegram delivered to the
    # bot is for it (privacy mode passes bare commands to the bot it thinks they are for);
    # a bare command it does not know may be another bot's and stays chatter.
    commands: frozenset[str] = frozenset()

    @classmethod
    def of(cls, user: User, commands: Iterable[str] = ()) -> BotIdentity:
        return cls(user.id, (user.username or "").lower(), frozenset(c.lower() for c in commands))


@dataclass(frozen=True)
class Normalized:
    inbound: Inbound
    username: str | None  # the sender's @username (lower case), for allowed_users


def chat_ref(chat: Chat, thread_id: int | None = None) -> ChatRef:
    kind = ChatKind.GROUP
    if chat.type == ChatType.PRIVATE:
        kind = ChatKind.DIRECT
    elif chat.type == ChatType.CHANNEL:
        kind = ChatKind.CHANNEL
    return ChatRef(
        platform=PLATFORM,
        chat_id=str(chat.id),
        thread_id=str(thread_id) if thread_id else None,
        kind=kind,
    )


def user_ref(user: User) -> UserRef:
    return UserRef(
        platform=PLATFORM, user_id=str(user.id), display_name=user.full_name, is_bot=user.is_bot
    )


def topic_of(message: Message) -> int | None:
    return message.message_thread_id if message.is_topic_message else None


def inbound_from(update: Update, me: BotIdentity) -> Normalized | None:
    """The Inbound for a new message to the bot, or None when the update is not one to handle."""
    edit = update.edited_message
    message = update.message or edit
    sender = message.from_user if message else None
    if message is None or sender is None or sender.is_bot:
        return None
    text, entities = _text_and_entities(message)
    attachments = _attachments(message)
    if not text.strip() and not attachments:
        return None  # service messages, stickers, polls...
    chat = chat_ref(message.chat, topic_of(message))
    mentioned = chat.kind is ChatKind.DIRECT or _addresses(message, entities, me)
    command = _command(entities)
    if command is not None:
        if edit is not None:
            return None  # a command ran when it was sent; its edit is not run again
        name, target, length = command
        if target and target != me.username:
            return None  # `/help@other_bot`: not for us
        # Drop the "@this_bot" suffix so admission sees a plain command.
        text = f"/{name}{text[length:]}"
        mentioned = mentioned or bool(target) or name.lower() in me.commands
    else:
        text = _strip_leading_mention(text, me)
        quote = _quoted(message, me)
        if quote:
            text = f"{quote}\n{text}" if text else quote
    inbound = Inbound(
        event_id=f"tg:{update.update_id}",
        chat=chat,
        sender=user_ref(sender),
        text=text,
        message_id=str(message.message_id),
        mentioned=mentioned,
        attachments=attachments,
        received_at=time.time(),
        edit_of=str(message.message_id) if edit is not None else None,
    )
    return Normalized(inbound, sender.username.lower() if sender.username else None)


def press_from(update: Update) -> ButtonPress | None:
    """The ButtonPress for a click on one of our inline buttons (None for inline-mode messages)."""
    query = update.callback_query
    if query is None or query.data is None or query.message is None:
        return None
    message = query.message
    thread = topic_of(message) if isinstance(message, Message) else None
    chat = chat_ref(message.chat, thread)
    return ButtonPress(
        event_id=f"tg:{update.update_id}",
        chat=chat,
        user=user_ref(query.from_user),
        data=query.data,
        message=SentRef(chat=chat, message_id=str(message.message_id)),
    )


def _text_and_entities(message: Message) -> tuple[str, dict[MessageEntity, str]]:
    if message.text is not None:
        return message.text, message.parse_entities()
    return message.caption or "", message.parse_caption_entities()


def _command(entities: dict[MessageEntity, str]) -> tuple[str, str, int] | None:
    """(name, lower-case @target or "", length in text) when the message starts with a command."""
    for entity, value in entities.items():
        if entity.type == MessageEntity.BOT_COMMAND and entity.offset == 0:
            name, _, target = value[1:].partition("@")
            return name, target.lower(), len(value)
    return None


def _addresses(message: Message, entities: dict[MessageEntity, str], me: BotIdentity) -> bool:
    for entity, value in entities.items():
        if entity.type == MessageEntity.MENTION and value[1:].lower() == me.username:
            return True
        if entity.type == MessageEntity.TEXT_MENTION and entity.user and entity.user.id == me.id:
            return True
    reply = _real_reply(message)
    return bool(reply and reply.from_user and reply.from_user.id == me.id)


def _real_reply(message: Message) -> Message | None:
    """The message this one answers; in a forum every message "replies" to its topic's start."""
    reply = message.reply_to_message
    if reply is None or reply.forum_topic_created is not None:
        return None
    if message.is_topic_message and reply.message_id == message.message_thread_id:
        return None
    return reply


def _quoted(message: Message, me: BotIdentity) -> str:
    """A line showing what the person replied to, when it is not the bot's own message."""
    reply = _real_reply(message)
    if reply is None or (reply.from_user and reply.from_user.id == me.id):
        return ""
    quoted = (message.quote.text if message.quote else None) or reply.text or reply.caption
    if not quoted:
        return ""
    who = reply.from_user.full_name if reply.from_user else "someone"
    if len(quoted) > _QUOTE_CHARS:
        quoted = quoted[:_QUOTE_CHARS] + "…"
    return f'[replying to {who}: "{quoted}"]'


def _strip_leading_mention(text: str, me: BotIdentity) -> str:
    handle = f"@{me.username}"
    if me.username and text.lower().startswith(handle):
        rest = _LEADING_MENTION_TAIL.sub("", text[len(handle) :])
        return rest or text
    return text


def _attachments(message: Message) -> tuple[Attachment, ...]:
    """Photos, documents, voice notes, audio, videos and video notes, as Attachments. A
    document is typed by its declared MIME type (a screenshot sent as a file is an image);
    the turn sniffs the bytes before trusting it."""
    found: list[Attachment] = []
    if message.photo:
        photo = max(message.photo, key=lambda p: (p.width * p.height, p.file_size or 0))
        found.append(_attachment(AttachmentKind.IMAGE, photo, "photo", "image/jpeg"))
    document = message.document
    if document is not None:
        kind = declared_kind(document.mime_type or "application/octet-stream")
        found.append(_attachment(kind, document, "document", document.mime_type))
    voice = message.voice
    if voice is not None:
        found.append(
            _attachment(AttachmentKind.VOICE, voice, "voice", voice.mime_type or "audio/ogg")
        )
    if message.audio is not None:
        audio = message.audio
        found.append(_attachment(AttachmentKind.AUDIO, audio, "audio", audio.mime_type))
    if message.video is not None:
        video = message.video
        found.append(_attachment(AttachmentKind.VIDEO, video, "video", video.mime_type))
    if message.video_note is not None:
        found.append(
            _attachment(AttachmentKind.VIDEO, message.video_note, "video_note", "video/mp4")
        )
    return tuple(found)


class _TelegramFile(Protocol):
    @property
    def file_id(self) -> str: ...

    @property
    def file_unique_id(self) -> str: ...

    @property
    def file_size(self) -> int | None: ...


def _attachment(
    kind: AttachmentKind, media: _TelegramFile, stem: str, mime: str | None
) -> Attachment:
    """Telegram's own file name where it has one, else `<stem>_<unique id><extension>`."""
    name = (
        getattr(media, "file_name", None)
        or f"{stem}_{media.file_unique_id}{extension_for(mime or '')}"
    )
    return Attachment(
        kind=kind, file_id=media.file_id, name=name, size=media.file_size, mime_type=mime
    )
