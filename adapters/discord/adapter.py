"""The Discord adapter: receives on the gateway in one process per bot, sends over REST from any.

Only the holder of the "discord" leader lease keeps the gateway connection (another process
takes over when it goes); with `discord.shard_ids` set, every process connects with its own
shards instead. Messages and slash commands become Inbounds for admission; button presses
go to the core's press handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import discord

from adapters.discord.access import DiscordAccess
from adapters.discord.buttons import ActionButton
from adapters.discord.client import (
    configure_endpoints,
    gateway_client,
    rate_limit_trace,
    rest_client,
)
from adapters.discord.commands import build_tree, sync_commands
from adapters.discord.files import DiscordFiles
from adapters.discord.interactions import InteractionReplies
from adapters.discord.normalize import (
    PLATFORM,
    button_press,
    chat_ref,
    clean_text,
    command_inbound,
    mentions_bot,
    message_inbound,
    user_ref,
)
from adapters.discord.presses import answer_press, show
from adapters.discord.sending import MAX_LEN, DiscordSender
from adapters.discord.settings import DiscordSettings
from adapters.discord.uploads import MAX_UPLOAD_BYTES, DiscordUploads
from gateway.sdk import (
    AdapterContext,
    Capabilities,
    ChatKind,
    ChatRef,
    DeliveryError,
    LeaderElection,
    Outbound,
    PressReply,
    ReceivedJournal,
    SentRef,
    Status,
    StoreUnavailable,
    StreamSupport,
    Submission,
    TurnOutcome,
    crash_point,
    keys,
    stop_tasks,
)

log = logging.getLogger(__name__)

# Joins, pins, thread announcements and the like are not messages to answer.
_CHAT_TYPES = (discord.MessageType.default, discord.MessageType.reply)
INTENT_HELP = (
    "Discord refused the message content intent: enable MESSAGE CONTENT INTENT for this bot "
    "in the Developer Portal (Bot > Privileged Gateway Intents)"
)


ACK_REACTION = "\N{EYES}"


class DiscordAdapter:
    platform = PLATFORM
    capabilities = Capabilities(
        max_len=MAX_LEN,
        can_edit=True,
        buttons=True,
        threads=True,
        max_upload_bytes=MAX_UPLOAD_BYTES,
        # Post, then edit (followups for slash commands): about one edit a second.
        streaming=StreamSupport(interval=1.0, measure=lambda text: len(text.strip())),
    )

    def __init__(self, settings: DiscordSettings, ctx: AdapterContext) -> None:
        if settings.token is None or not settings.token.get_secret_value():
            raise ValueError("discord.token is not set")
        self._settings = settings
        self._ctx = ctx
        self._access = DiscordAccess(settings)
        # channel id -> (its lock, how many events hold or wait for it)
        self._channel_order: dict[str, tuple[asyncio.Lock, int]] = {}
        ctx.extensions.add_access_rule(self._access.rule)
        self._free = frozenset(settings.free_response_channels)
        self._replies = InteractionReplies()
        self._sender = DiscordSender(self._rest_client, self._replies)
        self._uploads = DiscordUploads(self._rest_client, self._replies, self._sender)
        self._files = DiscordFiles(self._rest_client, settings.api_url)
        self._received = ReceivedJournal(
            ctx.store, ctx.submit, key=keys.DISCORD_RECEIVED, what="discord message"
        )
        self._rest: discord.Client | None = None
        self._gateway: discord.Client | None = None
        self._trace = rate_limit_trace(
            lambda: ctx.metrics.inc("platform_rate_limited_total", platform=PLATFORM)
        )
        self._gateway_task: asyncio.Task[None] | None = None
        self._leader: LeaderElection | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.ready = asyncio.Event()  # set while this process's gateway session is up
        if ctx.http is not None:
            ctx.http.add_readiness_check(PLATFORM, self._readiness)

    @property
    def receiving(self) -> bool:
        """This process holds the gateway connection (it is the leader, or sharded)."""
        return self._gateway is not None

    async def state(self) -> str:
        if self._gateway is not None:
            return "connected to the gateway" if self.ready.is_set() else "connecting"
        if self._leader is not None and not self._leader.is_leader:
            return "standby: another replica holds the gateway connection; sending works"
        return "not connected to the gateway"

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        configure_endpoints(self._settings)
        self._rest = await self._login(rest_client(self._trace))
        if self._settings.shard_ids is not None:
            await self._connect()
            return
        self._leader = LeaderElection(
            self._ctx.store,
            PLATFORM,
            self._ctx.instance_id,
            ttl=self._settings.leader_ttl,
            on_elected=self._connect,
            on_deposed=self._disconnect,
        )
        self._leader.start()

    async def stop(self) -> None:
        if self._leader is not None:
            await self._leader.stop()  # disconnects and releases the lease for a quick takeover
            self._leader = None
        else:
            await self._disconnect()
        await stop_tasks(list(self._tasks))
        await self._files.close()
        if self._rest is not None:
            await self._rest.close()
            self._rest = None

    # -- Adapter protocol ---------------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        if out.attachments:
            return await self._uploads.send(out)
        return await self._sender.send(out)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        await self._sender.edit(ref, out)

    async def delete(self, ref: SentRef) -> None:
        await self._sender.delete(ref)

    async def typing(self, chat: ChatRef) -> None:
        await self._sender.typing(chat)

    async def direct_chat(self, user_id: str) -> ChatRef:
        return await self._sender.direct_chat(user_id)

    async def read_history(
        self, chat: ChatRef, *, max_messages: int, max_chars: int
    ) -> tuple[str, ...]:
        """The channel's (or thread's) newest messages, as the bot's permissions allow."""
        return await self._sender.history(chat, max_messages=max_messages, max_chars=max_chars)

    async def acknowledge(self, chat: ChatRef, message_id: str) -> None:
        """A reaction on a message the running turn took in."""
        await self._sender.react(chat, message_id, ACK_REACTION)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """An attachment's bytes from Discord's CDN (file_id is its URL)."""
        return await self._files.download(file_id, max_bytes or MAX_UPLOAD_BYTES)

    # -- the gateway connection ----------------------------------------------------------------

    def _rest_client(self) -> discord.Client:
        if self._rest is None:
            raise DeliveryError("the Discord adapter is not running")
        return self._rest

    async def _login(self, client: discord.Client) -> discord.Client:
        assert self._settings.token is not None
        try:
            await client.login(self._settings.token.get_secret_value())
        except discord.LoginFailure:
            await client.close()
            raise RuntimeError(
                "Discord rejected discord.token; copy the bot token from the Developer Portal "
                "(Bot > Reset Token)"
            ) from None
        except BaseException:
            await client.close()  # its aiohttp session would leak otherwise
            raise
        return client

    async def _connect(self) -> None:
        client = gateway_client(self, self._settings, self._trace)
        # Presses on buttons of any earlier message (before a restart too) route by template.
        client.add_dynamic_items(ActionButton)
        tree = build_tree(client, self._on_command, dict(self._ctx.commands()))
        await self._login(client)
        self._gateway = client
        self._gateway_task = asyncio.create_task(
            self._run_gateway(client, tree), name="discord gateway"
        )
        self._spawn(self._replay_received())

    async def _replay_received(self) -> None:
        """What a replica that held this connection before received and never stored."""
        try:
            await self._received.replay()
        except StoreUnavailable as exc:  # left noted: the next replica to connect replays it
            log.warning("discord receipts not replayed error=%s", exc)

    async def _run_gateway(
        self, client: discord.Client, tree: discord.app_commands.CommandTree[Any]
    ) -> None:
        shards = self._settings.shard_ids
        try:
            if shards is None or 0 in shards:  # one process syncs the commands
                await sync_commands(tree, self._settings.sync_guilds)
            await client.connect(reconnect=True)
        except discord.PrivilegedIntentsRequired:
            log.error(INTENT_HELP)
        except Exception:
            log.exception("discord gateway connection ended with an error")

    async def _disconnect(self) -> None:
        client, task = self._gateway, self._gateway_task
        self._gateway = self._gateway_task = None
        self.ready.clear()
        if client is not None:
            await client.close()
        if task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, timeout=5)

    async def _readiness(self) -> str | None:
        if self._gateway is not None and not self.ready.is_set():
            return "discord gateway not connected"
        return None

    # -- events from the gateway client ----------------------------------------------------------

    def on_gateway_ready(self, client: discord.Client) -> None:
        log.info(
            "discord gateway ready app=%s guilds=%d", client.application_id, len(client.guilds)
        )
        self.ready.set()

    async def on_gateway_message(self, client: discord.Client, message: discord.Message) -> None:
        # discord.py runs each event in a task of its own: a channel's messages are taken one
        # at a time, in the order they came (a lock's waiters go first come, first served), so
        # chatter kept as context is stored before the mention that follows it.
        async with self._in_order(str(message.channel.id)):
            await self._take_message(client, message)

    @contextlib.asynccontextmanager
    async def _in_order(self, channel: str) -> AsyncIterator[None]:
        lock, users = self._channel_order.get(channel, (asyncio.Lock(), 0))
        self._channel_order[channel] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._channel_order[channel]
            if users <= 1:
                del self._channel_order[channel]
            else:
                self._channel_order[channel] = (lock, users - 1)

    async def _take_message(self, client: discord.Client, message: discord.Message) -> None:
        if not isinstance(message.content, str):
            # Discord sends `content: null` for some messages; discord.py keeps it as is, and
            # its mention parsing (and ours) reads the content as text.
            message.content = ""
        bot = client.user
        if bot is None or message.author.bot or message.type not in _CHAT_TYPES:
            return
        chat = chat_ref(message.channel, message.guild.id if message.guild else None)
        mentioned = mentions_bot(message, bot.id)
        if chat.kind is not ChatKind.DIRECT and not (
            mentioned or self._answers_freely(message.channel, chat, bot.id)
        ):
            # Not addressed: not for the bot to answer, but what was said before it is asked
            # (the same group-context path Telegram's groups take, for allowed senders).
            if self._settings.channel_context:
                await self._keep_as_context(message, chat, bot.id)
            return
        text = clean_text(message, bot.id)
        # Written down before anything else: Discord never sends this message again.
        received = message_inbound(message, chat, text, mentioned=True)
        try:
            await self._received.note(received)
        except StoreUnavailable as exc:
            log.error(
                "discord message not recorded on receipt event=%s error=%s", received.event_id, exc
            )
        crash_point("discord_received")
        in_thread = False
        if (
            self._settings.auto_thread
            and mentioned
            and chat.kind is ChatKind.GROUP
            and chat.thread_id is None
            and self._access.reason(chat, user_ref(message.author)) is None
        ):
            thread = await self._open_thread(message, text)
            if thread is not None:
                chat, in_thread = chat_ref(thread, thread.guild.id), True
        inbound = message_inbound(message, chat, text, mentioned=True, reply=not in_thread)
        await self._ctx.submit(inbound)
        await self._received.done(received)

    async def on_gateway_edit(
        self, client: discord.Client, before: discord.Message, after: discord.Message
    ) -> None:
        """A person edited a message to the bot: admission replaces the stored one while no
        turn has used it, or takes the edit as a message of its own."""
        bot = client.user
        if bot is None or after.author.bot or before.content == after.content:
            return
        chat = chat_ref(after.channel, after.guild.id if after.guild else None)
        mentioned = mentions_bot(after, bot.id)
        if chat.kind is not ChatKind.DIRECT and not (
            mentioned or self._answers_freely(after.channel, chat, bot.id)
        ):
            return
        edited_at = after.edited_at.timestamp() if after.edited_at else 0.0
        inbound = message_inbound(after, chat, clean_text(after, bot.id), mentioned=True)
        await self._ctx.submit(
            inbound.model_copy(
                update={
                    "event_id": f"{inbound.event_id}:edit:{edited_at}",
                    "edit_of": str(after.id),
                }
            )
        )

    async def _keep_as_context(self, message: discord.Message, chat: ChatRef, bot_id: int) -> None:
        if self._access.reason(chat, user_ref(message.author)) is not None:
            return
        text = clean_text(message, bot_id)
        await self._ctx.submit(message_inbound(message, chat, text, mentioned=False))

    async def on_gateway_press(self, interaction: discord.Interaction[Any], data: str) -> None:
        press = button_press(interaction, data)
        reason = self._access.reason(press.chat, press.user)
        if reason is not None:
            await show(interaction, PressReply(toast=reason, alert=True), press)
            return
        await answer_press(interaction, press, self._ctx.press)

    def _answers_freely(self, channel: object, chat: ChatRef, bot_id: int) -> bool:
        """Free-response channels (and their threads) and threads the bot opened need no mention."""
        if chat.chat_id in self._free or chat.thread_id in self._free:
            return True
        return isinstance(channel, discord.Thread) and channel.owner_id == bot_id

    async def _open_thread(self, message: discord.Message, text: str) -> discord.Thread | None:
        first_line = text.splitlines()[0] if text else ""
        name = first_line[:90] or f"Chat with {message.author.display_name}"[:90]
        try:
            return await message.create_thread(name=name, auto_archive_duration=1440)
        except discord.HTTPException as exc:
            log.warning(
                "discord auto-thread failed channel=%s status=%s error=%r; answering in channel",
                message.channel.id,
                exc.status,
                exc.text,
            )
            return None

    # -- slash commands ------------------------------------------------------------------------

    async def _on_command(self, interaction: discord.Interaction[Any], text: str) -> None:
        try:
            # Discord wants an answer within 3 s; "thinking…" buys the turn 15 minutes.
            await interaction.response.defer(thinking=True)
        except discord.HTTPException as exc:
            log.warning("slash command not deferred status=%s error=%r", exc.status, exc.text)
            return
        marker = self._replies.open(interaction)
        submitted: Submission | None
        try:
            submitted = await self._ctx.submit(command_inbound(interaction, text))
        except Exception:
            log.exception("slash command submit failed")
            submitted = None
        self._spawn(self._finish_command(marker, submitted))

    async def _finish_command(self, marker: str, submitted: Submission | None) -> None:
        """After the turn, make sure the command got an answer (a refusal may have been silent)."""
        status: Status | None = None
        outcome: TurnOutcome | None = None
        try:
            if submitted is not None:  # None: submitting failed
                status = submitted.status
                outcome = await submitted.done
        finally:
            pending = self._replies.close(marker)
        if pending is None or pending.answered or not pending.valid:
            return
        try:
            await pending.interaction.followup.send(_unanswered(status, outcome))
        except discord.HTTPException as exc:
            log.warning("slash command answer failed status=%s error=%r", exc.status, exc.text)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _unanswered(status: Status | None, outcome: TurnOutcome | None) -> str:
    """The followup for a command whose turn sent nothing (so "thinking…" does not hang)."""
    if status is Status.DUPLICATE:
        return "This command was already handled."
    if outcome is None:
        return "Something went wrong on my side; please try again."
    if outcome.cancelled:
        return "Stopped."
    if status is Status.REFUSED:
        return "Sorry, I cannot take this request here."
    return outcome.error or "Done."
