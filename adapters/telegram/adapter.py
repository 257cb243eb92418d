"""TelegramAdapter: a python-telegram-bot Application running inside the gateway's event loop.

Updates arrive by long polling (only the holder of a leader lease polls when the store is
shared, since Telegram allows one getUpdates consumer per token) or by webhook on the
gateway's HTTP server. Either way they are normalized and handed to the router without
waiting for the turn; presses go to the core (Extensions.press) as tasks of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from datetime import timedelta
from typing import Any

from telegram import CallbackQuery, Update
from telegram.error import InvalidToken, TelegramError
from telegram.ext import Application, ApplicationBuilder, ContextTypes, TypeHandler

from adapters.telegram.access import TelegramAccess
from adapters.telegram.commands import menu, unknown_command_answer
from adapters.telegram.files import download
from adapters.telegram.lanes import Lanes
from adapters.telegram.normalize import PLATFORM, BotIdentity, inbound_from, press_from
from adapters.telegram.sending import TelegramSender
from adapters.telegram.settings import TelegramSettings
from adapters.telegram.transport import AiohttpRequest
from adapters.telegram.uploads import MAX_UPLOAD_BYTES, TelegramUploads
from adapters.telegram.webhook import WEBHOOK_PATH, webhook_handler
from gateway import keys
from gateway.channels import AdapterContext, Capabilities
from gateway.extensions import EXPIRED_BUTTON
from gateway.leader import LeaderElection
from gateway.messages import ButtonPress, ChatKind, ChatRef, Inbound, Outbound, PressReply, SentRef
from gateway.store.base import StoreUnavailable

log = logging.getLogger(__name__)

# Edited messages and channel posts are not asked for: the adapter would ignore them.
ALLOWED_UPDATES = ["message", "callback_query"]
PRESS_FAILED = "Something went wrong with that button; please try again."
_TOAST_LIMIT = 200  # characters answerCallbackQuery shows
_DRAIN_SECONDS = 5.0
_STOP_STEP_SECONDS = 10.0
_POOL_SIZE = 32  # connections for sending (getUpdates has its own); Telegram allows ~30 msg/s
_POOL_WAIT = 30.0  # seconds a send may wait for a free connection

PTBApp = Application[Any, Any, Any, Any, Any, Any]


class TelegramStartError(RuntimeError):
    """The adapter cannot start; the message says what to fix (and never holds the token)."""


class TelegramAdapter:
    platform = PLATFORM
    capabilities = Capabilities(
        max_len=4096,
        can_edit=True,
        buttons=True,
        threads=True,
        max_upload_bytes=MAX_UPLOAD_BYTES,
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
        self._app: PTBApp = _build_application(settings, *self._requests)
        self._sender = TelegramSender(
            self._app.bot,
            settings,
            on_rate_limited=lambda: ctx.metrics.inc(
                "platform_rate_limited_total", platform=PLATFORM
            ),
        )
        self._uploads = TelegramUploads(self._app.bot, self._sender)
        self._access = TelegramAccess(settings, PLATFORM)
        self._lanes = Lanes()
        self._tasks: set[asyncio.Task[None]] = set()
        self._me: BotIdentity | None = None
        self._leader: LeaderElection | None = None
        self._polling = False
        self._app.add_handler(TypeHandler(Update, self._on_update))
        self._app.add_error_handler(self._on_error)
        ctx.extensions.add_access_rule(self._access.rule)
        ctx.extensions.add_middleware("fallback", unknown_command_answer(PLATFORM, self.send))

    # -- lifecycle -------------------------------------------------------------------------

    def _rate_limited(self) -> None:
        self._ctx.metrics.inc("platform_rate_limited_total", platform=PLATFORM)

    async def start(self) -> None:
        await self._initialize()
        self._me = BotIdentity.of(self._app.bot.bot)
        await self._register_commands()
        await self._app.start()
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
            await self._app.initialize()
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
        if self._app.running:
            await _bounded(self._app.stop(), "update processing")  # drains the queue first
        await self._lanes.drain(_DRAIN_SECONDS)
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=_DRAIN_SECONDS)
        await _bounded(self._app.shutdown(), "connections")

    @property
    def polling(self) -> bool:
        return self._polling

    # -- the Adapter protocol --------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        if out.attachments:
            return await self._uploads.send(out)
        return await self._sender.send(out)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        await self._sender.edit(ref, out)

    async def typing(self, chat: ChatRef) -> None:
        await self._sender.typing(chat)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """The bytes of an attachment (Attachment.file_id), through getFile and the file URL
        with the bot's token; raises AttachmentTooLarge or AttachmentUnavailable."""
        limit = min(
            max_bytes or self._settings.download_max_bytes, self._settings.download_max_bytes
        )
        return await download(self._app.bot, self._requests[0], file_id, limit)

    # -- receiving -------------------------------------------------------------------------

    async def _on_update(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        # Runs inside PTB's one-at-a-time update loop: decide and hand off, never wait on a turn.
        assert self._me is not None
        if update.callback_query is not None:
            self._spawn(self._answer_press(update.callback_query, press_from(update)))
            return
        normalized = inbound_from(update, self._me)
        if normalized is None:
            return
        inbound = normalized.inbound
        self._access.remember(inbound.sender.user_id, normalized.username)
        if not self._wanted(inbound):
            return
        self._lanes.run(inbound.chat.address, lambda: self._ctx.submit(inbound))

    def _wanted(self, inbound: Inbound) -> bool:
        """Unaddressed group chatter goes to the router only as context, and only if allowed."""
        if inbound.chat.kind is ChatKind.DIRECT or inbound.mentioned or inbound.is_command:
            return True
        # A refusal for chatter nobody addressed to the bot would be noise.
        return self._settings.group_context and self._access.allows(inbound)

    async def _answer_press(self, query: CallbackQuery, press: ButtonPress | None) -> None:
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

    async def _on_error(self, update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
        log.error("telegram update handling failed error=%r", context.error)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- polling and webhook ---------------------------------------------------------------

    async def _start_polling(self) -> None:
        updater = self._app.updater
        if updater is None or updater.running:
            return
        # No drop_pending_updates: a new leader must pick up what the old one left.
        await updater.start_polling(
            timeout=timedelta(seconds=self._settings.poll_timeout),
            bootstrap_retries=3,
            allowed_updates=ALLOWED_UPDATES,
        )
        self._polling = True
        log.info("telegram polling started instance=%s", self._ctx.instance_id)

    async def _stop_polling(self) -> None:
        updater = self._app.updater
        if updater is not None and updater.running:
            await updater.stop()  # confirms the fetched updates with one last getUpdates
            log.info("telegram polling stopped instance=%s", self._ctx.instance_id)
        self._polling = False

    async def _start_webhook(self) -> None:
        if self._ctx.http is None:
            raise TelegramStartError("telegram.mode = webhook needs the HTTP server (http.enabled)")
        assert self._settings.webhook_secret is not None
        secret = self._settings.webhook_secret.get_secret_value()
        self._ctx.http.add_route(
            "POST", WEBHOOK_PATH, webhook_handler(secret, self._app.bot, self._app.update_queue)
        )
        # Every replica sets the same webhook; Telegram keeps one, so this is idempotent.
        try:
            await self._app.bot.set_webhook(
                self._settings.webhook_url, secret_token=secret, allowed_updates=ALLOWED_UPDATES
            )
        except TelegramError as exc:
            raise TelegramStartError(f"Telegram refused the webhook URL: {exc.message}") from None

    async def _register_commands(self) -> None:
        try:
            await self._app.bot.set_my_commands(menu(self._ctx.commands()))
        except TelegramError as exc:  # the menu is a convenience; the commands work without it
            log.warning("telegram command menu not set error=%s", exc.message)


async def _bounded(step: Coroutine[Any, Any, None], what: str) -> None:
    try:
        await asyncio.wait_for(step, _STOP_STEP_SECONDS)
    except TimeoutError:
        log.warning("telegram stop step timed out step=%s", what)


def _build_application(
    settings: TelegramSettings, request: AiohttpRequest, updates_request: AiohttpRequest
) -> PTBApp:
    assert settings.token is not None
    api = settings.api_url.rstrip("/")
    builder = (
        ApplicationBuilder()
        .token(settings.token.get_secret_value())
        .base_url(f"{api}/bot")
        .base_file_url(f"{api}/file/bot")
        # The gateway has its own scheduler; PTB's job queue would only start a second one.
        .job_queue(None)
        # Turns are concurrent already (the router); updates stay in order for the lanes.
        .concurrent_updates(False)
        # A send that finds every connection busy waits for one instead of failing after 1 s.
        .request(request)
        .get_updates_request(updates_request)
    )
    if settings.mode == "webhook":
        builder = builder.updater(None)
    return builder.build()
