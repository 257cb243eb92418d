"""Outgoing messages over Discord's REST API: splitting, buttons, replies, followups, errors.

Any process can send (REST needs no gateway connection). 429s are waited out by discord.py's
own HTTP client; what still fails becomes a `DeliveryError`, permanent when Discord refused
for good (missing permissions, unknown channel).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import discord
from discord.utils import MISSING

from adapters.base import DeliveryError, split_text
from adapters.discord.buttons import build_view
from adapters.discord.interactions import InteractionReplies, PendingCommand
from adapters.discord.normalize import PLATFORM, channel_id
from gateway.sdk import ChatKind, ChatRef, MessageGone, Outbound, SentRef

log = logging.getLogger(__name__)

MAX_LEN = 2000
# The agent's text must never ping @everyone or roles; a reply may notify the person asked.
MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=False, replied_user=True)
# Followup failures that mean the interaction token is gone: post to the channel instead.
_TOKEN_GONE = {10015, 50027}  # Unknown Webhook, Invalid Webhook Token
_PERMISSION_CODES = {50001: "View Channel", 50013: "Send Messages"}  # Missing Access / Permissions
_UNKNOWN_MESSAGE = 10008


class DiscordSender:
    def __init__(self, client: Callable[[], discord.Client], replies: InteractionReplies) -> None:
        self._client = client
        self._replies = replies
        self._direct: dict[str, ChatRef] = {}  # user id -> their DM channel (ids never change)

    async def direct_chat(self, user_id: str) -> ChatRef:
        """The DM channel with a person: a user id is not a channel id on Discord, so the
        channel is opened (or found again) through REST once and remembered."""
        found = self._direct.get(user_id)
        if found is not None:
            return found
        if not user_id.isdigit():
            raise DeliveryError(f"{user_id!r} is not a Discord user id", permanent=True)
        try:
            channel = await self._client().http.start_private_message(int(user_id))
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            user = ChatRef(platform=PLATFORM, chat_id=user_id, kind=ChatKind.DIRECT)
            raise delivery_error(exc, user, "DM open") from exc
        chat = ChatRef(platform=PLATFORM, chat_id=str(channel["id"]), kind=ChatKind.DIRECT)
        self._direct[user_id] = chat
        return chat

    async def send(self, out: Outbound) -> SentRef:
        parts = split_text(out.text.strip() or "…", MAX_LEN)
        pending = self._replies.get(out.reply_to)
        if pending is not None:
            sent = await self._followups(pending, out, parts)
            if sent is not None:
                return sent
        return await self._post(out, parts)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        text = _fit(out.text.strip() or "…")
        view = build_view(out.buttons) if out.buttons else None
        pending = self._replies.for_message(ref.message_id)
        try:
            if pending is not None:
                followup = pending.interaction.followup
                await followup.edit_message(int(ref.message_id), content=text, view=view)
                return
            channel = self._client().get_partial_messageable(channel_id(ref.chat))
            message = channel.get_partial_message(int(ref.message_id))
            await message.edit(content=text, view=view)
        except discord.NotFound as exc:
            if exc.code == _UNKNOWN_MESSAGE:
                raise MessageGone(f"Discord edit failed: {exc.text}") from exc
            raise delivery_error(exc, ref.chat, "edit") from exc
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise delivery_error(exc, ref.chat, "edit") from exc

    async def delete(self, ref: SentRef) -> None:
        pending = self._replies.for_message(ref.message_id)
        try:
            if pending is not None:
                await pending.interaction.followup.delete_message(int(ref.message_id))
                return
            channel = self._client().get_partial_messageable(channel_id(ref.chat))
            await channel.get_partial_message(int(ref.message_id)).delete()
        except discord.NotFound as exc:
            if exc.code != _UNKNOWN_MESSAGE:
                raise delivery_error(exc, ref.chat, "delete") from exc
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise delivery_error(exc, ref.chat, "delete") from exc

    async def typing(self, chat: ChatRef) -> None:
        try:
            await self._client().http.send_typing(channel_id(chat))
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise delivery_error(exc, chat, "typing") from exc

    async def history(self, chat: ChatRef, *, max_messages: int, max_chars: int) -> tuple[str, ...]:
        try:
            newest_first = await self._client().http.logs_from(
                channel_id(chat), min(max(max_messages, 1), 100)
            )
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise delivery_error(exc, chat, "history") from exc
        lines: list[str] = []
        for message in newest_first:
            text = str(message.get("content") or "").strip()
            if not text:
                continue
            author: Any = message.get("author") or {}
            name = author.get("global_name") or author.get("username") or "someone"
            line = f"{name}: {text}"
            max_chars -= len(line) + 1
            if max_chars < 0:
                break
            lines.append(line)
        return tuple(reversed(lines))

    async def react(self, chat: ChatRef, message_id: str, emoji: str) -> None:
        try:
            await self._client().http.add_reaction(channel_id(chat), int(message_id), emoji)
        except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
            raise delivery_error(exc, chat, "reaction") from exc

    async def _post(self, out: Outbound, parts: list[str]) -> SentRef:
        target = channel_id(out.chat)
        channel = self._client().get_partial_messageable(target)
        # Typed Any: discord.py's overloads omit None ("not a reply"), which send() accepts.
        reference: Any = None
        if out.reply_to and out.reply_to.isdigit():
            reference = discord.MessageReference(
                message_id=int(out.reply_to), channel_id=target, fail_if_not_exists=False
            )
        message_id = ""
        for number, part in enumerate(parts):
            last = number == len(parts) - 1
            try:
                message = await channel.send(
                    part,
                    allowed_mentions=MENTIONS,
                    reference=reference,
                    view=build_view(out.buttons) if last and out.buttons else MISSING,
                )
            except (discord.HTTPException, aiohttp.ClientError, OSError) as exc:
                raise delivery_error(exc, out.chat, "send") from exc
            reference = None  # only the first part replies
            message_id = str(message.id)
        return SentRef(chat=out.chat, message_id=message_id)

    async def _followups(
        self, pending: PendingCommand, out: Outbound, parts: list[str]
    ) -> SentRef | None:
        """Send as followups; None when the token is gone before anything was sent."""
        followup = pending.interaction.followup
        ephemeral = out.ephemeral_to is not None
        message_id = ""
        for number, part in enumerate(parts):
            last = number == len(parts) - 1
            view = build_view(out.buttons) if last and out.buttons else MISSING
            try:
                message = await followup.send(
                    part, wait=True, ephemeral=ephemeral, allowed_mentions=MENTIONS, view=view
                )
            except discord.HTTPException as exc:
                if exc.code in _TOKEN_GONE or exc.status == 401:
                    log.info("interaction token gone; posting to the channel instead")
                    if number == 0:
                        return None
                    return await self._post(
                        out.model_copy(update={"reply_to": None}), parts[number:]
                    )
                raise delivery_error(exc, out.chat, "followup") from exc
            except (aiohttp.ClientError, OSError) as exc:
                raise delivery_error(exc, out.chat, "followup") from exc
            self._replies.sent(pending, message.id)
            message_id = str(message.id)
        return SentRef(chat=out.chat, message_id=message_id)


def delivery_error(exc: BaseException, chat: ChatRef, action: str) -> DeliveryError:
    """Log a failed REST call clearly and classify it; never logs the token (it is not here)."""
    if isinstance(exc, discord.Forbidden):
        permission = _PERMISSION_CODES.get(exc.code, "the needed permission")
        if chat.thread_id and exc.code == 50013:
            permission = "Send Messages in Threads"
        log.error(
            "discord refused %s: missing permission channel=%s code=%s permission=%r error=%r; "
            "grant the bot %s in this channel",
            action,
            chat.address,
            exc.code,
            permission,
            exc.text,
            permission,
        )
        return DeliveryError(
            f"Discord refused to {action} in {chat.address}: missing {permission}",
            permanent=True,
        )
    if isinstance(exc, discord.NotFound):
        log.warning(
            "discord %s failed: not found channel=%s error=%r", action, chat.address, exc.text
        )
        return DeliveryError(f"Discord {action} failed: {exc.text}", permanent=True)
    log.warning("discord %s failed channel=%s error=%s", action, chat.address, exc)
    return DeliveryError(f"Discord {action} failed: {exc}")


def _fit(text: str) -> str:
    """Edits cannot split, so an over-long edit keeps its beginning."""
    return text if len(text) <= MAX_LEN else text[: MAX_LEN - 1] + "…"
