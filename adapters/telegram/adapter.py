"""TelegramAdapter: python-telegram-bot's Bot inside the gateway's event loop.

Updates arrive by long polling (only the holder of a leader lease polls when the store is
shared, since Telegram allows one getUpdates consumer per token) or by webhook on the
gateway's HTTP server. Either way they go through `UpdateIntake`, which hands each message
to admission; polling moves the offset only once it is stored there, and a webhook call is
answered once its raw update is stored (received.py), before it is read. Presses go to the
core (Extensions.press) as tasks of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from telegram import Bot, Update
from telegram.error import InvalidToken, TelegramError

from adapters.telegram.access import TelegramAccess
from adapters.telegram.commands import menu, unknown_command_answer
from adapters.telegram.files import download
from adapters.telegram.intake import UpdateIntake
from adapters.telegram.normalize import PLATFORM, BotIdentity
from adapters.telegram.polling import Poller
from adapters.telegram.received import ReceivedUpdates
from adapters.telegram.render import TELEGRAM_LIMIT, streamed_size
from adapters.telegram.sending import TelegramSender
from adapters.telegram.settings import TelegramSettings
from adapters.telegram.streaming import DraftStream
from adapters.telegram.transport import AiohttpRequest
from adapters.telegram.uploads import MAX_UPLOAD_BYTES, TelegramUploads
from adapters.telegram.webhook import WEBHOOK_PATH, webhook_handler
from gateway.sdk import (
    EXPIRED_BUTTON,
    AdapterContext,
    ButtonPress,
    Capabilities,
    ChatKind,
    ChatRef,
    LeaderElection,
    Outbound,
    PressReply,
    SentRef,
    StoreUnavailable,
    StreamSupport,
    UserRef,
    keys,
)

log = logging.getLogger(__name__)

# Edited messages and channel posts are not asked for: the adapter would ignore them.
ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
PRESS_FAILED = "Something went wrong with that button; please try again."
_TOAST_LIMIT = 200  # characters answerCallbackQuery shows
_DRAIN_SECONDS = 5.0
_STOP_STEP_SECONDS = 10.0
_POOL_SIZE = 32  # connections for sending (getUpdates has its own); Telegram allows ~30 msg/s
_POOL_WAIT = 30.0  # seconds a send may wait for a free connection


ACK_REACTION = "\N{EYES}"  # one of the reactions Telegram allows bots to set


class TelegramStartError(RuntimeError):
    """The adapter cannot start; the message says what to fix (and never holds the token)."""


class TelegramAdapter:
    platform = PLATFORM
    capabilities = Capabilities(
        max_len=TELEGRAM_LIMIT,
        can_edit=True,
        buttons=True,
        threads=True,
        max_upload_bytes=MAX_UPLOAD_BYTES,
        # About one edit a second per chat keeps clear of Telegram's flood limits.
        streaming=StreamSupport(interval=1.0, measure=streamed_size),
    )

    def __init__(self, settings: TelegramSettings, ctx: AdapterContext) -> None:
        if settings.token is None or not settings.token.get_secret_value():
            raise ValueError("telegram.token is required for the Telegram adapter")
        if settings.mode == "webhook" and not (settings.webhook_secret and settings.webhook_url):
            raise ValueError(
                "telegram.mode = webhook needs telegram.webhook_url and webhook_secret"
            )
        self._settings = settings
        self._ctx = ctx
        # Kept so a failed start can close their connection pools (PTB only closes them
        # after a successful initialize).
        self._requests = (
            AiohttpRequest(pool_size=_POOL_SIZE, pool_timeout=_POOL_WAIT),
            AiohttpRequest(pool_size=1),
        )
        self._bot = _build_bot(settings, *self._requests)
        self._sender = TelegramSender(self._bot, settings, on_rate_limited=self._rate_limited)
        self._uploads = TelegramUploads(self._bot, self._sender)
        self._access = TelegramAccess(settings, PLATFORM)
        self._tasks: set[asyncio.Task[None]] = set()
        self._me: BotIdentity | None = None
        self._leader: LeaderElection | None = None
        self._initialized = False
        self._drafts = settings.drafts
        self._no_drafts: set[str] = set()  # chats that refused a draft
        self.intake = UpdateIntake(
            ctx,
            self._access,
            group_context=settings.group_context,
            on_press=self._answer_press,
            spawn=self._spawn,
        )
        self._received: ReceivedUpdates | None = None  # webhook mode
        self._poller = Poller(
            self._bot, self.intake, timeout=settings.poll_timeout, allowed=ALLOWED_UPDATES
        )
        ctx.extensions.add_access_rule(self._access.rule)
        ctx.extensions.add_middleware("fallback", unknown_command_answer(PLATFORM, self.send))

    # -- lifecycle -------------------------------------------------------------------------

    def _rate_limited(self) -> None:
        self._ctx.metrics.inc("platform_rate_limited_total", platform=PLATFORM)

    async def start(self) -> None:
        await self._initialize()
        commands = [name for name, _ in self._ctx.commands()]
        self._me = self.intake.me = BotIdentity.of(self._bot.bot, [*commands, "start"])
        await self._register_commands()
        if self._settings.mode == "webhook":
            await self._start_webhook()
        elif self._ctx.store.shared:
            self._leader = LeaderElection(
                self._ctx.store,
                f"telegram-polling:{self._me.id}",
                self._ctx.instance_id,
                ttl=self._settings.leader_ttl,
                on_elected=self._start_polling,
                on_deposed=self._stop_polling,
            )
            self._leader.start()
        else:
            await self._start_polling()
        log.info("telegram ready bot=@%s mode=%s", self._me.username, self._settings.mode)

    async def _initialize(self) -> None:
        """getMe: fail fast, in one sentence, on a wrong token or URL."""
        try:
            await self._bot.initialize()
            self._initialized = True
        except TelegramError as exc:
            for request in self._requests:
                await request.shutdown()
            if isinstance(exc, InvalidToken):
                # `from None`: PTB's own message quotes the token.
                raise TelegramStartError(
                    "Telegram rejected the bot token: check telegram.token (from @BotFather)"
                ) from None
            raise TelegramStartError(
                f"cannot reach the Telegram Bot API at {self._settings.api_url} "
                f"({type(exc).__name__}): check telegram.api_url and the network"
            ) from None

    async def stop(self) -> None:
        # Each step is bounded: a stuck SDK call must not hold up the gateway's shutdown.
        if self._leader is not None:
            await _bounded(self._leader.stop(), "leader lease")
        await _bounded(self._stop_polling(), "polling")
        if self._received is not None:
            # What is left stays stored; the next start (or another replica) reads it.
            await _bounded(self._received.stop(), "received updates")
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=_DRAIN_SECONDS)
        if self._initialized:
            await _bounded(self._bot.shutdown(), "connections")
        else:
            for request in self._requests:
                await request.shutdown()

    @property
    def polling(self) -> bool:
        return self._poller.running

    async def state(self) -> str:
        if self._settings.mode == "webhook":
            return "receiving by webhook"
        if self.polling:
            problem = self._poller.problem
            return f"polling, retrying ({problem})" if problem else "polling"
        if self._leader is not None and not self._leader.is_leader:
            return "standby: another replica polls; sending works"
        return f"not polling: {self._poller.problem or 'stopped'}"

    # -- the Adapter protocol --------------------------------------------------------------

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

    async def acknowledge(self, chat: ChatRef, message_id: str) -> None:
        """A reaction on a message the running turn took in."""
        await self._sender.react(chat, message_id, ACK_REACTION)

    def open_stream(
        self, chat: ChatRef, *, reply_to: str | None, recipient: UserRef | None
    ) -> DraftStream | None:
        """Drafts in private chats (not their topics); None elsewhere: post and edit."""
        if not self._drafts or chat.kind is not ChatKind.DIRECT or chat.thread_id:
            return None
        if chat.chat_id in self._no_drafts:
            return None
        return DraftStream(self._sender, chat, on_refused=self._no_drafts.add)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """The bytes of an attachment (Attachment.file_id), through getFile and the file URL
        with the bot's token; raises AttachmentTooLarge or AttachmentUnavailable."""
        limit = min(
            max_bytes or self._settings.download_max_bytes, self._settings.download_max_bytes
        )
        return await download(self._bot, self._requests[0], file_id, limit)

    # -- receiving (adapters/telegram/intake.py takes updates) -------------------------

    async def _answer_press(self, update: Update, press: ButtonPress | None) -> None:
        query = update.callback_query
        assert query is not None
        reply = PressReply(toast=EXPIRED_BUTTON, alert=True)
        if press is not None:
            if not await self._first_press(press):
                return  # a redelivered update: the first delivery answered it
            try:
                reply = await self._ctx.press(press)
            except Exception:
                log.exception("button press failed chat=%s", press.chat.address)
                reply = PressReply(toast=PRESS_FAILED, alert=True)
        try:
            await query.answer(reply.toast[:_TOAST_LIMIT], show_alert=reply.alert)
        except TelegramError as exc:  # too old to answer: the spinner is gone anyway
            log.info("press not answered error=%s", exc.message)
        if reply.edit_text and press is not None and press.message is not None:
            try:
                await self.edit(press.message, Outbound(chat=press.chat, text=reply.edit_text))
            except Exception as exc:
                log.warning("press outcome not shown chat=%s error=%s", press.chat.address, exc)

    async def _first_press(self, press: ButtonPress) -> bool:
        key = keys.seen("telegram-press", press.event_id)
        try:
            return await self._ctx.store.set(key, "1", ttl=3600, only_if_absent=True)
        except StoreUnavailable:
            # Handle it rather than drop it: a decision is first-answer-wins anyway.
            return True

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- polling and webhook ---------------------------------------------------------------

    async def _start_polling(self) -> None:
        if self._poller.running:
            return
        # No drop_pending_updates: a new leader must pick up what the old one left.
        with contextlib.suppress(TelegramError):
            await self._bot.delete_webhook()
        self._poller.start()
        log.info("telegram polling started instance=%s", self._ctx.instance_id)

    async def _stop_polling(self) -> None:
        if self._poller.running:
            await self._poller.stop()  # confirms the taken updates with one last getUpdates
            log.info("telegram polling stopped instance=%s", self._ctx.instance_id)

    async def _start_webhook(self) -> None:
        if self._ctx.http is None:
            raise TelegramStartError("telegram.mode = webhook needs the HTTP server (http.enabled)")
        assert self._settings.webhook_secret is not None
        secret = self._settings.webhook_secret.get_secret_value()
        self._received = ReceivedUpdates(
            self._ctx.store,
            self._bot,
            self.intake.take_one,
            instance_id=self._ctx.instance_id,
            load=self._ctx.intake_load,
        )
        self._ctx.http.add_route("POST", WEBHOOK_PATH, webhook_handler(secret, self._received))
        # Started before setWebhook: this also picks up what a stopped process left.
        self._received.start()
        # Every replica sets the same webhook; Telegram keeps one, so this is idempotent.
        try:
            await self._bot.set_webhook(
                self._settings.webhook_url, secret_token=secret, allowed_updates=ALLOWED_UPDATES
            )
        except TelegramError as exc:
            raise TelegramStartError(f"Telegram refused the webhook URL: {exc.message}") from None

    async def _register_commands(self) -> None:
        try:
            await self._bot.set_my_commands(menu(self._ctx.commands()))
        except TelegramError as exc:  # the menu is a convenience; the commands work without it
            log.warning("telegram command menu not set error=%s", exc.message)


async def _bounded(step: Coroutine[Any, Any, None], what: str) -> None:
    try:
        await asyncio.wait_for(step, _STOP_STEP_SECONDS)
    except TimeoutError:
        log.warning("telegram stop step timed out step=%s", what)


def _build_bot(
    settings: TelegramSettings, request: AiohttpRequest, updates_request: AiohttpRequest
) -> Bot:
    assert settings.token is not None
    api = settings.api_url.rstrip("/")
    # A send that finds every connection busy waits for one instead of failing after 1 s;
    # getUpdates has its own connection.
    return Bot(
        settings.token.get_secret_value(),
        base_url=f"{api}/bot",
        base_file_url=f"{api}/file/bot",
        request=request,
        get_updates_request=updates_request,
    )
