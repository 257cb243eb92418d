"""Translate discord.py objects into chatgate's normalized types, and chats back into channel ids.

A guild channel is `chat_id` = channel id; a thread is `chat_id` = its parent channel plus
`thread_id` = the thread (so each thread is its own session); a DM is a direct chat on the DM
channel id. `space_id` is the guild id, for access rules.
"""

from __future__ import annotations

import re
from typing import Any

import discord

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

PLATFORM = "discord"
# Replies to a slash command carry this marker plus the interaction id instead of a message id.
INTERACTION_MARKER = "i:"


def chat_ref(channel: object, guild_id: int | None) -> ChatRef:
    """Where a message or interaction happened; `channel` is any discord.py channel object."""
    if isinstance(channel, discord.Thread):
        return ChatRef(
            platform=PLATFORM,
            chat_id=str(channel.parent_id),
            thread_id=str(channel.id),
            kind=ChatKind.GROUP,
            space_id=str(channel.guild.id),
        )
    channel_id = str(getattr(channel, "id", ""))
    if guild_id is None or isinstance(channel, discord.DMChannel | discord.GroupChannel):
        return ChatRef(platform=PLATFORM, chat_id=channel_id, kind=ChatKind.DIRECT)
    return ChatRef(
        platform=PLATFORM, chat_id=channel_id, kind=ChatKind.GROUP, space_id=str(guild_id)
    )


def channel_id(chat: ChatRef) -> int:
    """The Discord channel to post in: the thread when there is one (threads are channels)."""
    return int(chat.thread_id or chat.chat_id)


def user_ref(user: discord.User | discord.Member) -> UserRef:
    roles: tuple[str, ...] = ()
    if isinstance(user, discord.Member):
        roles = tuple(str(role.id) for role in user.roles if not role.is_default())
    return UserRef(
        platform=PLATFORM,
        user_id=str(user.id),
        display_name=user.display_name,
        is_bot=user.bot,
        roles=roles,
    )


def mentions_bot(message: discord.Message, bot_id: int) -> bool:
    if bot_id in message.raw_mentions or any(u.id == bot_id for u in message.mentions):
        return True
    # A reply to one of the bot's messages addresses it too.
    resolved = message.reference.resolved if message.reference is not None else None
    return isinstance(resolved, discord.Message) and resolved.author.id == bot_id


def clean_text(message: discord.Message, bot_id: int) -> str:
    """The message text without the bot's mention, with other mentions as readable names."""
    text = re.sub(rf"<@!?{bot_id}>", "", message.content)
    for user in message.mentions:
        if user.id != bot_id:
            text = re.sub(rf"<@!?{user.id}>", f"@{user.display_name}", text)
    return text.strip()


def attachments(message: discord.Message) -> tuple[Attachment, ...]:
    """Message attachments; the handle is the attachment's CDN URL (files.py fetches it, and
    only from Discord's CDN). A voice message recorded in Discord is a voice note."""
    return tuple(
        Attachment(
            kind=AttachmentKind.VOICE
            if item.is_voice_message()
            else declared_kind(item.content_type),
            file_id=item.url,
            name=item.filename,
            size=item.size,
            mime_type=item.content_type,
        )
        for item in message.attachments
    )


def message_inbound(
    message: discord.Message, chat: ChatRef, text: str, *, mentioned: bool, reply: bool = True
) -> Inbound:
    return Inbound(
        event_id=f"dc:{message.id}",
        chat=chat,
        sender=user_ref(message.author),
        text=text,
        message_id=str(message.id) if reply else None,
        mentioned=mentioned,
        attachments=attachments(message),
    )


def interaction_chat(interaction: discord.Interaction[Any]) -> ChatRef:
    channel: object = interaction.channel
    if channel is None:  # not in any cache and no payload: fall back to the bare id
        channel = discord.Object(interaction.channel_id or 0)
    return chat_ref(channel, interaction.guild_id)


def command_inbound(interaction: discord.Interaction[Any], text: str) -> Inbound:
    """A slash command as a message; its replies come back marked for the interaction."""
    return Inbound(
        event_id=f"dc:i:{interaction.id}",
        chat=interaction_chat(interaction),
        sender=user_ref(interaction.user),
        text=text,
        message_id=f"{INTERACTION_MARKER}{interaction.id}",
        mentioned=True,
    )


def button_press(interaction: discord.Interaction[Any], data: str) -> ButtonPress:
    chat = interaction_chat(interaction)
    message = interaction.message
    return ButtonPress(
        event_id=f"dc:i:{interaction.id}",
        chat=chat,
        user=user_ref(interaction.user),
        data=data,
        message=SentRef(chat=chat, message_id=str(message.id)) if message is not None else None,
    )
