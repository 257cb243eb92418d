"""The WhatsApp adapter: the Cloud API over plain HTTP (aiohttp), webhooks on the gateway's
HTTP server.

Meta app setup: a WhatsApp Business number (its phone number id), a system user token with
whatsapp_business_messaging, the app secret (signs webhooks) and a verify token; subscribe
the webhook to the `messages` field. Every replica serves the webhook; sending needs only
the token, so any replica can send to any number.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp

from adapters.whatsapp.access import WhatsAppAccess
from adapters.whatsapp.files import WhatsAppMedia
from adapters.whatsapp.graph import GraphClient, GraphError
from adapters.whatsapp.messages import MAX_DOCUMENT, MAX_TEXT
from adapters.whatsapp.normalize import PLATFORM, StatusUpdate, WebhookContent
from adapters.whatsapp.resend import SentMessages
from adapters.whatsapp.sending import WhatsAppSender
from adapters.whatsapp.settings import WhatsAppSettings
from adapters.whatsapp.statuses import DeliveryStatuses
from adapters.whatsapp.webhook import Unstored, WebhookEndpoint
from adapters.whatsapp.window import CustomerWindows
from gateway.sdk import (
    AdapterContext,
    AttachmentUnavailable,
    ButtonPress,
    Capabilities,
    ChatRef,
    DeliveryError,
    Outbound,
    SentRef,
    Status,
    StoreUnavailable,
    keys,
    stop_tasks,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")
# WhatsApp shows "typing…" for up to 25 seconds; the core renews typing more often.
_TYPING_EVERY = 20.0
_PRESS_SEEN_TTL = 7 * 24 * 3600.0  # Meta redelivers for up to a week


class WhatsAppStartError(RuntimeError):
    """The adapter cannot start: a setting is missing or Meta refused the token."""


class WhatsAppAdapter:
    platform = PLATFORM
    # WhatsApp cannot edit a sent message: replies arrive whole (no streaming), and an
    # "edit" (an approval's outcome) is a new message quoting the old one.
    capabilities = Capabilities(
        max_len=MAX_TEXT,
        can_edit=False,
        buttons=True,
        threads=False,
        typing=True,
        max_upload_bytes=MAX_DOCUMENT,
        streaming=None,
    )

    def __init__(self, settings: WhatsAppSettings, ctx: AdapterContext) -> None:
        missing = [
            name
            for name, value in (
                ("phone_number_id", settings.phone_number_id),
                ("access_token", settings.access_token),
                ("app_secret", settings.app_secret),
                ("verify_token", settings.verify_token),
            )
            if not value
        ]
        if missing:
            raise WhatsAppStartError(f"set whatsapp.{', whatsapp.'.join(missing)}")
        self._settings = settings
        self._ctx = ctx
        self._access = WhatsAppAccess(settings)
        ctx.extensions.add_access_rule(self._access.rule())
        self._windows = CustomerWindows(ctx.store)
        self._statuses = DeliveryStatuses(
            ctx.store,
            lambda status: ctx.metrics.inc(
                "platform_delivery_statuses_total", platform=PLATFORM, status=status
            ),
            self._window_refused,
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._typing_at: dict[str, float] = {}
        self._stopped = False
        self._session: aiohttp.ClientSession | None = None
        self._sender: WhatsAppSender | None = None
        self._media: WhatsAppMedia | None = None
        self.display_number = ""

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._stopped = False
        try:
            await self._start()
        except BaseException:
            await self.stop()
            raise

    async def _start(self) -> None:
        settings = self._settings
        assert settings.access_token and settings.app_secret and settings.verify_token
        if self._ctx.http is None:
            raise WhatsAppStartError(
                "WhatsApp webhooks need the gateway's HTTP server (http.enabled = true)"
            )
        self._session = aiohttp.ClientSession()
        graph = GraphClient(
            self._session,
            api_url=settings.api_url,
            api_version=settings.api_version,
            token=settings.access_token.get_secret_value(),
            retries=settings.send_retries,
            max_retry_after=settings.max_retry_after,
            on_throttled=lambda: self._ctx.metrics.inc(
                "platform_rate_limited_total", platform=PLATFORM
            ),
        )
        self.display_number = await self._identify(graph)
        self._media = WhatsAppMedia(graph, settings.phone_number_id)
        self._sender = WhatsAppSender(
            graph,
            self._media,
            self._windows,
            SentMessages(self._ctx.store),
            phone_number_id=settings.phone_number_id,
            template=settings.templates,
        )
        WebhookEndpoint(
            app_secret=settings.app_secret.get_secret_value(),
            verify_token=settings.verify_token.get_secret_value(),
            phone_number_id=settings.phone_number_id,
            take=self._take,
        ).mount(self._ctx.http, settings.webhook_path)
        log.info(
            "whatsapp adapter ready number=%s webhook=%s",
            self.display_number,
            settings.webhook_path,
        )

    async def _identify(self, graph: GraphClient) -> str:
        try:
            info = await graph.get(f"{self._settings.phone_number_id}?fields=display_phone_number")
        except GraphError as exc:
            raise WhatsAppStartError(
                f"Meta refused the WhatsApp settings ({exc.code}); check "
                "CHATGATE_WHATSAPP__ACCESS_TOKEN and CHATGATE_WHATSAPP__PHONE_NUMBER_ID"
            ) from None
        except DeliveryError as exc:
            raise WhatsAppStartError(
                f"cannot reach the Graph API at {self._settings.api_url} ({exc})"
            ) from None
        return str(info.get("display_phone_number") or self._settings.phone_number_id)

    async def state(self) -> str:
        if self._stopped:
            return "stopped"
        return f"receiving webhooks at {self._settings.webhook_path}"

    async def stop(self) -> None:
        self._stopped = True
        self._sender = None
        self._media = None
        tasks = list(self._tasks)
        await stop_tasks(tasks)
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the Adapter protocol ------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        return await _started(self._sender).send(out)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        """WhatsApp cannot edit: the new text goes as a message quoting the old one."""
        await self.send(out.model_copy(update={"reply_to": ref.message_id}))

    async def typing(self, chat: ChatRef) -> None:
        """Marks the person's last message read and shows "typing…" under it."""
        sender = self._sender
        now = time.monotonic()
        if (
            sender is None
            or now - self._typing_at.get(chat.chat_id, -_TYPING_EVERY) < _TYPING_EVERY
        ):
            return
        last = await self._windows.last(chat.chat_id)
        if last is None:
            return
        if len(self._typing_at) > 10_000:  # forget chats not typed in for a while
            self._typing_at = {k: v for k, v in self._typing_at.items() if now - v < _TYPING_EVERY}
        self._typing_at[chat.chat_id] = now
        try:
            await sender.mark_read(last[1], typing=True)
        except DeliveryError as exc:
            log.info("whatsapp typing indicator not shown chat=%s error=%s", chat.address, exc)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        if self._media is None:
            raise AttachmentUnavailable("the WhatsApp adapter is not running")
        return await self._media.download(file_id, max_bytes or MAX_DOCUMENT)

    # -- webhook content -----------------------------------------------------------------

    async def _take(self, content: WebhookContent) -> None:
        """Store every message (before the webhook's 200); presses and statuses after."""
        for received in content.messages:
            try:
                await self._windows.opened(received.number, received.inbound.event_id, received.at)
                result = await self._ctx.submit(received.inbound)
            except StoreUnavailable as exc:
                raise Unstored(str(exc)) from None
            if result.status is Status.UNAVAILABLE:
                raise Unstored(received.inbound.event_id)
        for press in content.presses:
            self._spawn(self._press(press))
        if content.statuses:  # in order: a notification may hold "sent" and "read"
            self._spawn(self._record_statuses(content.statuses))
        if content.skipped:
            log.info("whatsapp webhook content skipped kinds=%s", ",".join(content.skipped))

    async def _window_refused(self, message_id: str) -> None:
        if self._sender is not None:
            await self._sender.window_refused(message_id)

    async def _record_statuses(self, updates: list[StatusUpdate]) -> None:
        for update in updates:
            await self._statuses.record(update)

    async def _press(self, press: ButtonPress) -> None:
        store = self._ctx.store
        if not await store.set(
            keys.seen(PLATFORM, press.event_id), "1", ttl=_PRESS_SEEN_TTL, only_if_absent=True
        ):
            return  # Meta sent the notification again
        number = press.user.user_id
        # Pressing a button is a message from the person: it opens the window too.
        await self._windows.opened(number, press.event_id, time.time())
        refusal = self._access.refusal(number)
        if refusal is not None:
            await self._tell(press, refusal)
            return
        reply = await self._ctx.press(press)
        if reply.alert or reply.edit_text is None:
            if reply.toast:
                await self._tell(press, reply.toast)
            return
        await self._tell(press, reply.edit_text)

    async def _tell(self, press: ButtonPress, text: str) -> None:
        quoted = press.message.message_id if press.message else None
        await self.send(Outbound(chat=press.chat, text=text, reply_to=quoted))

    # -- helpers -------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        if self._stopped:
            work.close()
            return
        task = asyncio.create_task(self._logged(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _logged(work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except DeliveryError:
            pass  # logged where it failed, with WhatsApp's error code
        except StoreUnavailable as exc:
            log.warning("whatsapp webhook work not done: store unavailable (%s)", exc)
        except Exception:
            log.exception("whatsapp webhook work failed")


def _started(part: _T | None) -> _T:
    if part is None:
        raise DeliveryError("the WhatsApp adapter is not started")
    return part
