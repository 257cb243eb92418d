"""Sending, editing, drafts and typing through the Bot API, with Telegram's failure modes handled.

429 waits the `retry_after` Telegram asks for (a bounded number of times); 403 (blocked,
kicked) is permanent and logged once per chat; markup Telegram rejects is resent plain.
A draft (`sendMessageDraft`, a streamed reply's preview) is never retried: the next one
carries the newer text anyway, so a 429 only tells the stream to slow down.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Message, ReplyParameters
from telegram.constants import ChatAction, ParseMode
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.warnings import PTBDeprecationWarning

from adapters.telegram.render import Part, render_parts
from adapters.telegram.settings import TelegramSettings
from adapters.telegram.transport import MaybeSent
from gateway.sdk import (
    Backoff,
    Button,
    ChatKind,
    ChatRef,
    DeliveryError,
    MessageGone,
    Outbound,
    SentRef,
    StreamRefused,
    StreamThrottled,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# After a network error: 0.5 s before the first retry, doubling; a 429 waits what it asks.
_BACKOFF = Backoff(0.5)
_PERMANENT_BAD_REQUESTS = ("chat not found", "thread not found", "have no rights", "not enough")
_GONE = ("message to edit not found", "message_id_invalid", "message to delete not found")


class TelegramSender:
    def __init__(
        self,
        bot: Bot,
        settings: TelegramSettings,
        on_rate_limited: Callable[[], None] | None = None,
    ) -> None:
        self._bot = bot
        self._settings = settings
        self._on_rate_limited = on_rate_limited  # counts 429s for the metrics
        self._forbidden_logged: set[str] = set()

    async def send(self, out: Outbound) -> SentRef:
        chat = out.chat
        parts = render_parts(out.text, markdown=out.markdown)
        markup = keyboard(out.buttons)
        # In a DM a quote of the question is noise; in a group it shows whom we answer.
        reply_to = out.reply_to if chat.kind is not ChatKind.DIRECT else None
        if reply_to is not None and not reply_to.isdigit():
            reply_to = None  # not a Telegram message id (e.g. a scheduled message's origin)
        sent: Message | None = None
        for index, part in enumerate(parts):
            first, last = index == 0, index == len(parts) - 1
            args = (part, reply_to if first else None, markup if last else None)
            try:
                sent = await self._send_part(chat, *args)
            except _Migrated as moved:  # the group became a supergroup with a new id
                chat = chat.model_copy(update={"chat_id": str(moved.new_chat_id)})
                sent = await self._send_part(chat, *args)
        assert sent is not None  # render_parts returns at least one part
        return SentRef(chat=chat, message_id=str(sent.message_id))

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        # An edit is one message: the first part, if the new text is long.
        part = render_parts(out.text, markdown=out.markdown)[0]
        markup = keyboard(out.buttons)

        async def attempt(text: str, html: bool) -> None:
            await self._bot.edit_message_text(
                text,
                chat_id=ref.chat.chat_id,
                message_id=int(ref.message_id),
                parse_mode=ParseMode.HTML if html else None,
                reply_markup=markup,
            )

        try:
            await self._with_fallback(ref.chat, part, attempt)
        except _Migrated:
            raise DeliveryError("the chat moved to a new id; the message is gone") from None
        except DeliveryError as exc:
            reason = str(exc).lower()
            if "not modified" in reason:
                return  # the message already shows this text: nothing to do
            if any(gone in reason for gone in _GONE):
                raise MessageGone(str(exc)) from None
            raise

    async def delete(self, ref: SentRef) -> None:
        try:
            await self._retrying(
                ref.chat,
                lambda: self._bot.delete_message(ref.chat.chat_id, int(ref.message_id)),
            )
        except DeliveryError as exc:
            if not any(gone in str(exc).lower() for gone in _GONE):
                raise

    async def draft(self, chat: ChatRef, draft_id: int, text: str) -> None:
        """Show `text` (Markdown) as the chat's draft `draft_id`: a streamed reply's preview.

        Raises StreamThrottled on 429, StreamRefused where drafts cannot be used (an older
        Bot API, a chat that takes none), DeliveryError otherwise; never retries.
        """
        part = render_parts(text)[0]

        async def attempt(body: str, html: bool) -> None:
            await self._bot.send_message_draft(
                int(chat.chat_id),
                draft_id,
                body,
                message_thread_id=_thread(chat),
                parse_mode=ParseMode.HTML if html else None,
            )

        try:
            try:
                await attempt(part.text, part.html)
            except BadRequest as exc:
                if not part.html or not _unparsable(exc):
                    raise
                await attempt(part.plain, False)
        except RetryAfter as exc:
            wait = retry_after_seconds(exc)
            raise StreamThrottled(f"Telegram rate limit: wait {wait:.0f} s", wait) from None
        except Forbidden as exc:
            raise self._forbidden(chat, exc) from None
        except (BadRequest, InvalidToken) as exc:
            # InvalidToken is how PTB reports a 404: a Bot API server without the method.
            raise StreamRefused(f"Telegram refused the draft: {exc.message}") from None
        except TelegramError as exc:
            raise DeliveryError(f"Telegram draft failed: {exc.message}") from None

    async def typing(self, chat: ChatRef) -> None:
        # Cosmetic and renewed every few seconds: one try, no retries.
        try:
            await self._bot.send_chat_action(
                chat.chat_id, ChatAction.TYPING, message_thread_id=_thread(chat)
            )
        except Forbidden as exc:
            raise self._forbidden(chat, exc) from None

    async def react(self, chat: ChatRef, message_id: str, emoji: str) -> None:
        # Cosmetic like typing: one try.
        try:
            await self._bot.set_message_reaction(chat.chat_id, int(message_id), reaction=emoji)
        except Forbidden as exc:
            raise self._forbidden(chat, exc) from None

    async def call(
        self, chat: ChatRef, part: Part, attempt: Callable[[str, bool], Awaitable[None]]
    ) -> None:
        """One API call (`attempt(text, html)`) with this sender's retries and its plain-text
        fallback for markup Telegram rejects; for other senders (uploads.py)."""
        try:
            await self._with_fallback(chat, part, attempt, once_sent=True)
        except _Migrated:
            raise DeliveryError("the chat moved to a new id; send again", permanent=True) from None

    async def _send_part(
        self,
        chat: ChatRef,
        part: Part,
        reply_to: str | None,
        markup: InlineKeyboardMarkup | None,
    ) -> Message:
        reply = (
            ReplyParameters(int(reply_to), allow_sending_without_reply=True) if reply_to else None
        )
        sent: list[Message] = []

        async def attempt(text: str, html: bool) -> None:
            sent.append(
                await self._bot.send_message(
                    chat.chat_id,
                    text,
                    parse_mode=ParseMode.HTML if html else None,
                    message_thread_id=_thread(chat),
                    reply_parameters=reply,
                    reply_markup=markup,
                )
            )

        await self._with_fallback(chat, part, attempt, once_sent=True)
        return sent[-1]

    async def _with_fallback(
        self,
        chat: ChatRef,
        part: Part,
        attempt: Callable[[str, bool], Awaitable[None]],
        *,
        once_sent: bool = False,
    ) -> None:
        """Try the HTML; if Telegram cannot parse it, send the same part as plain text."""
        if not part.html:
            await self._retrying(chat, lambda: attempt(part.plain, False), once_sent=once_sent)
            return
        try:
            await self._retrying(chat, lambda: attempt(part.text, True), once_sent=once_sent)
        except _Unparsable:
            log.warning("telegram rejected the markup; sending plain chat=%s", chat.address)
            await self._retrying(chat, lambda: attempt(part.plain, False), once_sent=once_sent)

    async def _retrying(
        self, chat: ChatRef, call: Callable[[], Awaitable[T]], *, once_sent: bool = False
    ) -> T:
        """One API call with Telegram's errors mapped: wait on 429, retry network errors.
        `once_sent`: a call that posts a new message, not repeated once it may have reached
        Telegram (no answer in time): a lost answer beats the same message twice."""
        retries = self._settings.send_retries
        network_failures = 0
        for attempt in range(retries + 1):
            try:
                return await call()
            except RetryAfter as exc:
                if self._on_rate_limited is not None:
                    self._on_rate_limited()
                wait = retry_after_seconds(exc)
                if attempt == retries or wait > self._settings.max_retry_after:
                    raise DeliveryError(
                        f"Telegram rate limit: asked to wait {wait:.0f} s", permanent=False
                    ) from None
                log.info("telegram rate limited chat=%s retry_after=%.1f", chat.address, wait)
                await _BACKOFF.wait(network_failures, asked=wait)
            except Forbidden as exc:
                raise self._forbidden(chat, exc) from None
            except ChatMigrated as exc:
                raise _Migrated(exc.new_chat_id) from None
            except BadRequest as exc:
                message = exc.message.lower()
                if _unparsable(exc):
                    raise _Unparsable(exc.message) from None
                permanent = any(word in message for word in _PERMANENT_BAD_REQUESTS)
                raise DeliveryError(
                    f"Telegram refused: {exc.message}", permanent=permanent
                ) from None
            except MaybeSent as exc:
                if once_sent:
                    log.warning("telegram send unanswered, not repeated chat=%s", chat.address)
                    raise DeliveryError(
                        f"{exc.message}; the message may have arrived, so it is not sent again"
                    ) from None
                if attempt == retries:
                    raise DeliveryError(f"Telegram unreachable: {exc.message}") from None
                network_failures += 1
                await _BACKOFF.wait(network_failures)
            except NetworkError as exc:  # includes TimedOut; BadRequest is handled above
                if attempt == retries:
                    raise DeliveryError(f"Telegram unreachable: {exc.message}") from None
                log.info("telegram network error chat=%s error=%s", chat.address, exc.message)
                network_failures += 1
                await _BACKOFF.wait(network_failures)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _forbidden(self, chat: ChatRef, exc: Forbidden) -> DeliveryError:
        if chat.chat_id not in self._forbidden_logged:
            self._forbidden_logged.add(chat.chat_id)
            log.warning("telegram forbids sending chat=%s reason=%s", chat.address, exc.message)
        return DeliveryError(f"Telegram refused: {exc.message}", permanent=True)


def retry_after_seconds(exc: RetryAfter) -> float:
    """The wait Telegram asked for. PTB 22 warns on reading `retry_after` (an int today, a
    timedelta from PTB 23 or with PTB_TIMEDELTA set); both shapes are read, without the warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        wait = exc.retry_after
    return wait.total_seconds() if isinstance(wait, timedelta) else float(wait)


class _Unparsable(Exception):
    """Telegram could not parse the HTML of a part."""


class _Migrated(Exception):
    def __init__(self, new_chat_id: int) -> None:
        super().__init__(f"chat migrated to {new_chat_id}")
        self.new_chat_id = new_chat_id


def _unparsable(exc: BadRequest) -> bool:
    message = exc.message.lower()
    return "can't parse entities" in message or "unsupported start tag" in message


def keyboard(rows: tuple[tuple[Button, ...], ...]) -> InlineKeyboardMarkup | None:
    if not rows:
        return None
    for row in rows:
        for button in row:
            if len(button.data.encode()) > 64:
                raise DeliveryError(f"button data over Telegram's 64 bytes: {button.data[:20]}…")
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton(b.label, callback_data=b.data) for b in row] for row in rows]
    )


def _thread(chat: ChatRef) -> int | None:
    return int(chat.thread_id) if chat.thread_id else None
