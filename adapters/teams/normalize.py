"""Bot Framework activities from Teams turned into the core's messages, and chat addresses back.

A channel's conversation id names the thread (`19:…@thread.tacv2;messageid=<root>`): the
ChatRef keeps the channel as `chat_id` and the root message as `thread_id`, so each thread is
its own session and replies land in it. Personal and group chats have no threads.
"""

from __future__ import annotations

import html
import mimetypes
import re
from typing import Any

from microsoft_agents.activity import Activity
from microsoft_agents.activity import Attachment as ActivityAttachment

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
from gateway.sdk.media import declared_kind

PLATFORM = "teams"
CHANNEL_ID = "msteams"
# The key of an Adaptive Card submit's data that carries the core's Button.data.
SUBMIT_KEY = "chatgate"
FILE_DOWNLOAD_INFO = "application/vnd.microsoft.teams.file.download.info"
# Attachment handles: a pre-authenticated SharePoint link, or a URL on the connector that
# needs the bot's token.
DOWNLOAD_PREFIX = "download:"
CONNECTOR_PREFIX = "connector:"

_THREAD = ";messageid="
_KINDS = {"personal": ChatKind.DIRECT, "groupChat": ChatKind.GROUP, "channel": ChatKind.CHANNEL}
_AT = re.compile(r"<at[^>]*>(.*?)</at>", re.IGNORECASE | re.DOTALL)
_TAGS = re.compile(r"<[^>]+>")
_BREAKS = re.compile(r"<br\s*/?>|</p>|</div>", re.IGNORECASE)


def conversation_id(chat: ChatRef) -> str:
    """The Bot Framework conversation id to send to for `chat`."""
    if chat.thread_id:
        return f"{chat.chat_id}{_THREAD}{chat.thread_id}"
    return chat.chat_id


def tenant_of(activity: Activity) -> str | None:
    data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
    tenant = data.get("tenant")
    if isinstance(tenant, dict) and isinstance(tenant.get("id"), str):
        return str(tenant["id"])
    if activity.conversation is not None and activity.conversation.tenant_id:
        return activity.conversation.tenant_id
    return None


def chat_of(activity: Activity) -> ChatRef:
    conversation = activity.conversation
    if conversation is None or not conversation.id:
        raise ValueError("the activity names no conversation")
    kind = _KINDS.get(conversation.conversation_type or "", ChatKind.GROUP)
    if not conversation.conversation_type and not conversation.is_group:
        kind = ChatKind.DIRECT
    chat_id, _, thread = conversation.id.partition(_THREAD)
    if kind is ChatKind.CHANNEL and not thread:
        # A channel activity without the thread in its id: the activity itself starts one.
        thread = activity.id or ""
    return ChatRef(
        platform=PLATFORM,
        chat_id=chat_id,
        thread_id=thread if kind is ChatKind.CHANNEL and thread else None,
        kind=kind,
        space_id=tenant_of(activity),
    )


def sender_of(activity: Activity) -> UserRef:
    sender = activity.from_property
    if sender is None or not sender.id:
        raise ValueError("the activity names no sender")
    return UserRef(
        platform=PLATFORM,
        # The Entra object id is the same for every bot and what an admin finds in Entra.
        user_id=sender.aad_object_id or sender.id,
        display_name=sender.name or None,
    )


def mentions_bot(activity: Activity) -> bool:
    bot = activity.recipient.id if activity.recipient is not None else None
    for entity in activity.entities or []:
        mentioned = getattr(entity, "mentioned", None)
        if entity.type == "mention" and mentioned is not None and mentioned.id == bot:
            return True
    return False


def clean_text(activity: Activity) -> str:
    """The words of a message: the bot's own mention dropped, others kept as names, HTML
    turned into plain text."""
    bot_name = activity.recipient.name if activity.recipient is not None else None
    text = activity.text or ""

    def mention(match: re.Match[str]) -> str:
        name = html.unescape(match.group(1)).strip()
        return "" if bot_name and name == bot_name else name

    text = _AT.sub(mention, text)
    text = _BREAKS.sub("\n", text)
    text = html.unescape(_TAGS.sub("", text))
    return "\n".join(line.strip() for line in text.strip().splitlines())


def attachments_of(activity: Activity) -> tuple[Attachment, ...]:
    found: list[Attachment] = []
    for item in activity.attachments or []:
        attachment = _attachment(item)
        if attachment is not None:
            found.append(attachment)
    return tuple(found)


def _attachment(item: ActivityAttachment) -> Attachment | None:
    content: Any = item.content
    if item.content_type == FILE_DOWNLOAD_INFO and isinstance(content, dict):
        url = content.get("downloadUrl")
        if not isinstance(url, str) or not url:
            return None
        name = item.name or None
        mime = mimetypes.guess_type(name or "")[0] if name else None
        return Attachment(
            kind=declared_kind(mime) if mime else AttachmentKind.DOCUMENT,
            file_id=DOWNLOAD_PREFIX + url,
            name=name,
            mime_type=mime,
        )
    mime = item.content_type or ""
    if item.content_url and mime.split("/", 1)[0] in ("image", "audio", "video"):
        return Attachment(
            kind=declared_kind(mime),
            file_id=CONNECTOR_PREFIX + item.content_url,
            name=item.name or None,
            mime_type=mime,
        )
    return None  # the message's HTML copy, cards and links are not files


def submitted_data(activity: Activity) -> str | None:
    """The Button.data an Adaptive Card Action.Submit sent back, if this activity is one."""
    value = activity.value
    if isinstance(value, dict) and isinstance(value.get(SUBMIT_KEY), str):
        return str(value[SUBMIT_KEY])
    return None


def message_inbound(activity: Activity) -> Inbound:
    chat = chat_of(activity)
    mentioned = chat.kind is ChatKind.DIRECT or mentions_bot(activity)
    return Inbound(
        event_id=activity.id or "",
        chat=chat,
        sender=sender_of(activity),
        text=clean_text(activity),
        message_id=activity.id,
        mentioned=mentioned,
        attachments=attachments_of(activity),
    )


def button_press(activity: Activity, data: str) -> ButtonPress:
    chat = chat_of(activity)
    card = activity.reply_to_id
    return ButtonPress(
        event_id=activity.id or "",
        chat=chat,
        user=sender_of(activity),
        data=data,
        message=SentRef(chat=chat, message_id=card) if card else None,
    )
