"""Mattermost posts, slash commands and action callbacks turned into the core's messages.

Pure functions over the JSON Mattermost sends. A channel is `chat_id` = channel id; a thread
(`root_id`) is `thread_id` = its root post, so each thread is its own session. With
`reply_in_thread` a mention in a channel opens a thread under the post it is in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
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
from gateway.sdk.media import declared_kind

PLATFORM = "mattermost"
Json = Mapping[str, Any]
_KINDS = {"D": ChatKind.DIRECT, "G": ChatKind.GROUP, "O": ChatKind.CHANNEL, "P": ChatKind.CHANNEL}


@dataclass(frozen=True)
class BotIdentity:
    """The bot account, from `GET /users/me`."""

    user_id: str
    username: str

    def mention_pattern(self) -> re.Pattern[str]:
        return re.compile(rf"(?<![\w.-])@{re.escape(self.username)}(?![\w-])", re.IGNORECASE)


class NotAPost(ValueError):
    """A `posted` event whose post is missing or not shaped like a post."""


def posted_post(data: Json) -> dict[str, Any]:
    """The post inside a `posted` event (Mattermost sends it as a JSON string)."""
    raw = data.get("post")
    try:
        post = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        raise NotAPost("the post is not JSON") from None
    if not isinstance(post, dict):
        raise NotAPost("the event has no post object")
    for name in ("id", "channel_id", "user_id"):
        if not isinstance(post.get(name), str) or not post[name]:
            raise NotAPost(f"the post has no {name}")
    if not isinstance(post.get("message", ""), str):
        raise NotAPost("the post's message is not text")
    return post


def mentioned_ids(data: Json) -> list[str]:
    """The user ids a `posted` event says the post mentions (a JSON string list)."""
    raw = data.get("mentions")
    try:
        found = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return []
    return [str(item) for item in found] if isinstance(found, list) else []


def is_ignored(post: Json, bot: BotIdentity) -> bool:
    """System posts, the bot's own posts and posts from other integrations are not input."""
    if post.get("type"):  # "" for people's posts; system_join_channel and the like
        return True
    if post.get("user_id") == bot.user_id:
        return True
    props = post.get("props")
    return isinstance(props, dict) and (
        props.get("from_bot") == "true" or props.get("from_webhook") == "true"
    )


def post_chat(post: Json, channel_type: str, team_id: str, *, reply_in_thread: bool) -> ChatRef:
    """Where to answer a post: its thread when it is in one; in channels with
    `reply_in_thread`, a thread under the post itself."""
    kind = _KINDS.get(channel_type, ChatKind.CHANNEL)
    thread = str(post.get("root_id") or "")
    if not thread and kind is not ChatKind.DIRECT and reply_in_thread:
        thread = str(post["id"])
    return ChatRef(
        platform=PLATFORM,
        chat_id=str(post["channel_id"]),
        thread_id=thread or None,
        kind=kind,
        space_id=team_id or None,
    )


def is_mentioned(post: Json, data: Json, bot: BotIdentity) -> bool:
    if bot.user_id in mentioned_ids(data):
        return True
    return bool(bot.mention_pattern().search(str(post.get("message", ""))))


def clean_text(text: str, bot: BotIdentity) -> str:
    """The post's text without the bot's @mention."""
    return re.sub(r"[ \t]{2,}", " ", bot.mention_pattern().sub("", text)).strip()


def attachments(post: Json) -> tuple[Attachment, ...]:
    """The post's files; the handle is the file id (files.py fetches it from /api/v4/files)."""
    metadata = post.get("metadata")
    infos = metadata.get("files") if isinstance(metadata, dict) else None
    found: list[Attachment] = []
    if isinstance(infos, list):
        for info in infos:
            if isinstance(info, dict) and isinstance(info.get("id"), str):
                mime = info.get("mime_type") if isinstance(info.get("mime_type"), str) else None
                size = info.get("size")
                found.append(
                    Attachment(
                        kind=declared_kind(mime),
                        file_id=info["id"],
                        name=str(info.get("name") or "") or None,
                        size=size if isinstance(size, int) else None,
                        mime_type=mime,
                    )
                )
    known = {item.file_id for item in found}
    for file_id in post.get("file_ids") or []:
        if isinstance(file_id, str) and file_id not in known:
            found.append(Attachment(kind=AttachmentKind.OTHER, file_id=file_id))
    return tuple(found)


def sender_ref(user_id: str, name: str) -> UserRef:
    return UserRef(platform=PLATFORM, user_id=user_id, display_name=name.lstrip("@") or None)


def post_inbound(post: Json, chat: ChatRef, sender_name: str, text: str) -> Inbound:
    return Inbound(
        event_id=f"mm:{post['id']}",
        chat=chat,
        sender=sender_ref(str(post["user_id"]), sender_name),
        text=text,
        message_id=str(post["id"]),
        mentioned=True,
        attachments=attachments(post),
    )


@dataclass(frozen=True)
class SlashCommand:
    """A slash command request's fields (form data Mattermost posts)."""

    trigger_id: str
    channel_id: str
    user_id: str
    user_name: str
    team_id: str
    text: str
    root_id: str

    @classmethod
    def parse(cls, form: Mapping[str, str]) -> SlashCommand:
        """ValueError when a field the adapter needs is missing."""
        for name in ("channel_id", "user_id", "trigger_id"):
            if not form.get(name):
                raise ValueError(f"the slash command has no {name}")
        return cls(
            trigger_id=form["trigger_id"],
            channel_id=form["channel_id"],
            user_id=form["user_id"],
            user_name=form.get("user_name", ""),
            team_id=form.get("team_id", ""),
            text=form.get("text", ""),
            root_id=form.get("root_id", ""),
        )


def command_inbound(command: SlashCommand, kind: ChatKind, commands: set[str]) -> Inbound:
    """A slash command as a message; `/chatgate new` runs the chat command /new."""
    text = command.text.strip()
    first = text.split(maxsplit=1)[0].lower() if text else ""
    if first in commands:
        text = "/" + text
    chat = ChatRef(
        platform=PLATFORM,
        chat_id=command.channel_id,
        thread_id=command.root_id or None,
        kind=kind,
        space_id=command.team_id or None,
    )
    return Inbound(
        event_id=f"mm:cmd:{command.trigger_id}",
        chat=chat,
        sender=sender_ref(command.user_id, command.user_name),
        text=text,
        mentioned=True,
    )


def action_press(body: Json, data: str, chat: ChatRef, event_id: str) -> ButtonPress:
    post_id = str(body.get("post_id") or "")
    return ButtonPress(
        event_id=event_id,
        chat=chat,
        user=sender_ref(str(body["user_id"]), str(body.get("user_name") or "")),
        data=data,
        message=SentRef(chat=chat, message_id=post_id) if post_id else None,
    )
