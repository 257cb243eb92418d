"""The bolt listeners: acknowledge at once, then hand the work to the core in a task.

Bolt acks events before their listener runs; commands and actions ack first thing here.
Nothing in a listener waits for a turn (a turn may itself wait for a button press that
only an acknowledged request can deliver). Retries are not filtered here: every Inbound
carries Slack's event_id and admission drops repeats through the shared store.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_bolt.request.async_request import AsyncBoltRequest

from adapters.slack.access import SlackAccess
from adapters.slack.blocks import ACTION_PREFIX
from adapters.slack.history import SlackHistory
from adapters.slack.indicator import WorkingIndicator
from adapters.slack.normalize import (
    BotIdentity,
    button_press,
    chat_kind,
    edited_message,
    event_inbound,
    is_ignored,
    slash_inbound,
)
from adapters.slack.sending import SlackSender
from adapters.slack.settings import SlackSettings
from adapters.slack.threads import AnsweredThreads
from gateway.sdk import (
    AdapterContext,
    ButtonPress,
    ChatKind,
    DeliveryError,
    Inbound,
    Outbound,
    Status,
)

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None]], None]
Json = dict[str, Any]

WORKING = "Working on it…"
THREAD_READ_SECONDS = 1.5  # Slack wants its event acknowledged within 3 s
STORE_DOWN = "I could not take that right now (my storage is unreachable); please try again."


class NotStored(Exception):
    """The store is unreachable: the event is not acknowledged, so Slack delivers it again."""


@dataclass(frozen=True)
class SlackListeners:
    ctx: AdapterContext
    settings: SlackSettings
    bot: BotIdentity
    sender: SlackSender
    threads: AnsweredThreads
    history: SlackHistory
    indicator: WorkingIndicator
    access: SlackAccess
    spawn: Spawn

    def register(self, app: AsyncApp) -> None:
        app.event("app_mention")(self.on_mention)
        app.event("message")(self.on_message)
        app.command(self.settings.slash_command)(self.on_command)
        app.action(re.compile("^" + re.escape(ACTION_PREFIX)))(self.on_action)

    # -- listeners (bolt injects arguments by name) -------------------------------------

    # The app processes before responding (adapter.py): an event is acknowledged only after
    # these return, and they return once the message is stored (one store round trip).

    async def on_mention(self, body: Json, event: Json, request: AsyncBoltRequest) -> None:
        _log_redelivery(body, request)
        await self._mention(body, event)

    async def on_message(self, body: Json, event: Json, request: AsyncBoltRequest) -> None:
        _log_redelivery(body, request)
        await self._message(body, event)

    async def on_command(self, ack: AsyncAck, command: Json) -> None:
        inbound = slash_inbound(command, {name for name, _ in self.ctx.commands()})
        if not inbound.text:
            await ack(f"Usage: {self.settings.slash_command} <your request>")
            return
        # Refused here so the refusal is private, not a post in the channel.
        refusal = self.access.refusal(inbound.chat, inbound.sender.user_id)
        if refusal is not None:
            await ack(refusal)
            return
        try:
            await self._submit(inbound)
        except NotStored:
            # Slack does not send a slash command again: say so to the person who typed it.
            await ack(STORE_DOWN)
            return
        await ack(WORKING)

    async def on_action(self, ack: AsyncAck, body: Json) -> None:
        await ack()
        press = button_press(body)
        if press is not None and press.data:
            self.spawn(self._press(press))

    # -- work after the ack -------------------------------------------------------------

    async def _mention(self, body: Json, event: Json) -> None:
        # A DM is delivered as message.im; answering its app_mention too would answer twice.
        if is_ignored(event, self.bot) or chat_kind(str(event["channel"])) is ChatKind.DIRECT:
            return
        inbound = self._inbound(body, event, mentioned=True)
        thread, ts = event.get("thread_ts"), str(event.get("ts"))
        if (
            thread
            and thread != ts
            and not await self.threads.answered(inbound.chat.chat_id, thread)
        ):
            # The first mention in a thread: what was said there before is this turn's context.
            inbound = inbound.model_copy(update={"context": await self._thread(inbound, thread)})
        await self._submit(inbound)

    async def _thread(self, inbound: Inbound, thread_ts: str) -> tuple[str, ...]:
        try:
            async with asyncio.timeout(THREAD_READ_SECONDS):  # the event is acked after this
                return await self.history.thread(
                    inbound.chat.chat_id,
                    thread_ts,
                    str(inbound.message_id),
                    max_messages=self.ctx.context_messages,
                    max_chars=self.ctx.context_chars,
                )
        except (DeliveryError, TimeoutError) as exc:
            log.warning("thread not read chat=%s error=%s", inbound.chat.address, exc)
            return ()

    async def _message(self, body: Json, event: Json) -> None:
        changed = edited_message(event)
        if changed is not None:
            await self._edited(body, changed)
            return
        if is_ignored(event, self.bot):
            return
        mentioned = True
        channel = str(event["channel"])
        if chat_kind(channel, event.get("channel_type")) is not ChatKind.DIRECT:
            if self.bot.mention in str(event.get("text") or ""):
                return  # the app_mention event for this message is answered instead
            thread = event.get("thread_ts")
            if not thread or thread == event.get("ts"):
                return  # channel chatter outside a thread is not for the bot
            if not await self.threads.answered(channel, str(thread)):
                return
            # Off: kept as context for the next mention in the thread, not answered.
            mentioned = self.settings.thread_followups
        await self._submit(self._inbound(body, event, mentioned=mentioned))

    async def _edited(self, body: Json, message: Json) -> None:
        """A person edited a message the bot was asked in (a DM, or one that mentions it)."""
        if is_ignored(message, self.bot):
            return
        direct = chat_kind(str(message["channel"]), message.get("channel_type"))
        if direct is not ChatKind.DIRECT and self.bot.mention not in str(message.get("text")):
            return
        inbound = self._inbound(body, message, mentioned=True)
        await self._submit(inbound.model_copy(update={"edit_of": inbound.message_id}))

    def _inbound(self, body: Json, event: Json, *, mentioned: bool) -> Inbound:
        event_id = body.get("event_id") or f"{event.get('channel')}:{event.get('ts')}"
        return event_inbound(
            event,
            event_id=str(event_id),
            team_id=body.get("team_id") or event.get("team"),
            bot=self.bot,
            mentioned=mentioned,
        )

    async def _submit(self, inbound: Inbound) -> None:
        result = await self.ctx.submit(inbound)
        if result.status is Status.UNAVAILABLE:
            raise NotStored(inbound.event_id)
        ts = inbound.message_id
        if not ts:
            return
        if result.status in (Status.STARTED, Status.QUEUED):
            chat = inbound.chat
            self.indicator.expect(chat, ts)
            result.done.add_done_callback(lambda _: self.spawn(self.indicator.finished(chat, ts)))

    async def _press(self, press: ButtonPress) -> None:
        refusal = self.access.refusal(press.chat, press.user.user_id)
        if refusal is not None:
            await self._tell(press, refusal)
            return
        reply = await self.ctx.press(press)
        if reply.alert or reply.edit_text is None or press.message is None:
            # A refusal (or a plain notice) goes to the presser alone; the message stays.
            if reply.toast:
                await self._tell(press, reply.toast)
            return
        await self.sender.update(press.message, Outbound(chat=press.chat, text=reply.edit_text))

    async def _tell(self, press: ButtonPress, text: str) -> None:
        await self.sender.post_ephemeral(Outbound(chat=press.chat, text=text), press.user.user_id)


def _log_redelivery(body: Json, request: AsyncBoltRequest) -> None:
    # Socket Mode sets the header on every envelope, "0" for a first delivery.
    retry = (request.headers.get("x-slack-retry-num") or ["0"])[0]
    if retry.isdigit() and int(retry) > 0:
        reason = (request.headers.get("x-slack-retry-reason") or [""])[0]
        log.info(
            "slack event redelivered event=%s retry=%s reason=%s",
            body.get("event_id"),
            retry,
            reason,
        )
