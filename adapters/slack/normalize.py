"""Slack payloads (events, slash commands, block actions) turned into the core's messages.

Pure functions over the JSON Slack sends, so they are tested without a network. Channel
messages live in threads: a message's ChatRef carries `thread_ts or ts`, which makes the
reply land in its thread and each thread its own session.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from adapters.slack.mrkdwn import to_plain
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

PLATFORM = "slack"
# Subtypes that are still a person writing; edits, deletions, joins and bot posts are not.
_HUMAN_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
_SPACES = re.compile(r"[ \t]{2,}")

Payload = Mapping[str, Any]


@dataclass(frozen=True)
class BotIdentity:
    """Who the bot is in its workspace, from `auth.test`."""

    user_id: str
    bot_id: str
    team_id: str

    @property
    def mention(self) -> str:
        return f"<@{self.user_id}>"


def chat_kind(channel_id: str, channel_type: str | None = None) -> ChatKind:
    if channel_type == "im" or (channel_type is None and channel_id.startswith("D")):
        return ChatKind.DIRECT
    if channel_type == "mpim":
        return ChatKind.GROUP
    return ChatKind.CHANNEL


def message_chat(event: Payload, team_id: str | None) -> ChatRef:
    """Where to answer a message: its thread in channels; in a DM, its thread only if it has one."""
    channel = str(event["channel"])
    kind = chat_kind(channel, event.get("channel_type"))
    thread = event.get("thread_ts")
    if kind is not ChatKind.DIRECT:
        thread = thread or event["ts"]
    return ChatRef(
        platform=PLATFORM,
        chat_id=channel,
        thread_id=str(thread) if thread else None,
        kind=kind,
        space_id=team_id,
    )


def edited_message(event: Payload) -> dict[str, Any] | None:
    """A person's edit (`message_changed`) as the message it now is, with the channel and
    channel type of the event; None for anything else (a link unfurled, a bot's edit)."""
    if event.get("subtype") != "message_changed":
        return None
    message = event.get("message")
    if not isinstance(message, dict) or message.get("subtype") not in _HUMAN_SUBTYPES:
        return None
    before = event.get("previous_message")
    if isinstance(before, dict) and before.get("text") == message.get("text"):
        return None  # Slack changed something else (an unfurl, a reaction count)
    return {
        **message,
        "channel": event.get("channel"),
        "channel_type": event.get("channel_type"),
    }


def is_ignored(event: Payload, bot: BotIdentity) -> bool:
    """Bot posts (ours and others'), edits, deletions and other system subtypes are not input."""
    if event.get("subtype") not in _HUMAN_SUBTYPES:
        return True
    if event.get("bot_id") or event.get("bot_profile"):
        return True
    user = event.get("user")
    return not user or user == bot.user_id


def clean_text(text: str, bot: BotIdentity) -> str:
    """The message as the agent reads it: our own mention removed, Slack markup decoded."""
    text = text.replace(bot.mention, " ")
    return _SPACES.sub(" ", to_plain(text)).strip()


def event_inbound(
    event: Payload, *, event_id: str, team_id: str | None, bot: BotIdentity, mentioned: bool
) -> Inbound:
    chat = message_chat(event, team_id)
    return Inbound(
        event_id=event_id,
        chat=chat,
        sender=UserRef(platform=PLATFORM, user_id=str(event["user"])),
        text=clean_text(str(event.get("text") or ""), bot),
        message_id=str(event["ts"]),
        mentioned=mentioned or chat.kind is ChatKind.DIRECT,
        attachments=attachments(event.get("files") or ()),
    )


def attachments(files: Collection[Payload]) -> tuple[Attachment, ...]:
    """Shared files as Attachments (the handle is the Slack file id; files.info finds the
    bytes). A clip recorded in Slack (subtype slack_audio) is a voice note."""
    found: list[Attachment] = []
    for file in files:
        if not file.get("id") or file.get("mode") == "tombstone":  # deleted files
            continue
        mime = str(file.get("mimetype") or "")
        kind = declared_kind(mime)
        if file.get("subtype") == "slack_audio":
            kind = AttachmentKind.VOICE
        found.append(
            Attachment(
                kind=kind,
                file_id=str(file["id"]),
                name=file.get("name"),
                size=file.get("size"),
                mime_type=mime or None,
            )
        )
    return tuple(found)


def command_text(text: str, command_names: Collection[str]) -> str:
    """`/chatgate new` runs the gateway's /new; anything else is a prompt for the agent.

    Only a lone command word is mapped, so `/chatgate help me write a poem` stays a prompt;
    text that already starts with `/` (`/chatgate /status`) passes through unchanged.
    """
    text = text.strip()
    if " " not in text and text.lower() in command_names:
        return "/" + text.lower()
    return text


def slash_inbound(command: Payload, command_names: Collection[str]) -> Inbound:
    """A slash command as a message to the bot in the channel it was typed in."""
    channel = str(command["channel_id"])
    direct = channel.startswith("D") or command.get("channel_name") == "directmessage"
    chat = ChatRef(
        platform=PLATFORM,
        chat_id=channel,
        kind=ChatKind.DIRECT if direct else ChatKind.CHANNEL,
        space_id=command.get("team_id"),
    )
    return Inbound(
        # Slash commands carry no event id; the trigger id is unique per invocation.
        event_id=f"slash:{command.get('trigger_id') or command.get('command_ts', '')}",
        chat=chat,
        sender=UserRef(platform=PLATFORM, user_id=str(command["user_id"])),
        text=command_text(to_plain(str(command.get("text") or "")), command_names),
        mentioned=True,
    )


def button_press(body: Payload) -> ButtonPress | None:
    """A `block_actions` click on one of our buttons, or None when it carries no action."""
    actions = body.get("actions") or []
    if not actions:
        return None
    action = actions[0]
    container: Payload = body.get("container") or {}
    message: Payload = body.get("message") or {}
    channel = (body.get("channel") or {}).get("id") or container.get("channel_id")
    if not channel:
        return None
    message_ts = message.get("ts") or container.get("message_ts")
    thread = message.get("thread_ts") or container.get("thread_ts")
    if thread == message_ts:  # a thread's parent: it lives in the channel itself
        thread = None
    user: Payload = body.get("user") or {}
    team = (body.get("team") or {}).get("id") or user.get("team_id")
    chat = ChatRef(
        platform=PLATFORM,
        chat_id=str(channel),
        thread_id=str(thread) if thread else None,
        kind=chat_kind(str(channel)),
        space_id=team,
    )
    ref = None
    if message_ts and not container.get("is_ephemeral"):
        ref = SentRef(chat=chat, message_id=str(message_ts))
    return ButtonPress(
        event_id=str(body.get("trigger_id") or action.get("action_ts") or ""),
        chat=chat,
        user=UserRef(platform=PLATFORM, user_id=str(user.get("id", ""))),
        data=str(action.get("value") or ""),
        message=ref,
    )
