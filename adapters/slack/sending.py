"""Web API calls for sending: messages split to Slack's limits, edits, ephemerals, reactions.

Every failure leaves here as a DeliveryError; errors that no retry can fix (the bot is not
in the channel, the channel is gone, the token is dead) are marked permanent and logged
with what to do about them.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from adapters.base import split_text
from adapters.slack.blocks import SECTION_LIMIT, message_blocks, section
from adapters.slack.mrkdwn import escape, to_mrkdwn
from gateway.sdk import ChatKind, ChatRef, DeliveryError, MessageGone, Outbound, SentRef, UserRef

log = logging.getLogger(__name__)

# One limit for every part: a section block holds 3000 characters, and Slack shows
# messages of that size whole (its text field would take 40,000 but folds long ones).
MAX_TEXT = SECTION_LIMIT

_HINTS = {
    "not_in_channel": "invite the bot to the channel (/invite @bot)",
    "channel_not_found": "the channel is gone or the bot cannot see it",
    "is_archived": "the channel is archived",
    "invalid_auth": "check CHATGATE_SLACK__BOT_TOKEN",
    "not_authed": "check CHATGATE_SLACK__BOT_TOKEN",
    "token_revoked": "the bot token was revoked; reinstall the app",
    "account_inactive": "the bot token was revoked; reinstall the app",
    "missing_scope": "add the missing scope to the Slack app and reinstall it",
}
_PERMANENT = frozenset(
    {
        *_HINTS,
        "token_expired",
        "no_permission",
        "restricted_action",
        "user_not_found",
        "user_not_in_channel",
        "msg_too_long",
        "invalid_blocks",
        "cant_update_message",
        "message_not_found",
        "edit_window_closed",
        "team_access_not_granted",
    }
)


class SlackCallFailed(DeliveryError):
    """A Web API call Slack answered with an error; `code` is Slack's error string."""

    def __init__(self, message: str, *, code: str, permanent: bool) -> None:
        super().__init__(message, permanent=permanent)
        self.code = code


Chunk = dict[str, Any]


class RetryAfterHandler(AsyncRetryHandler):
    """Retries a 429 after the Retry-After Slack asked for, unless that wait is too long.

    slack_sdk's own rate-limit handler sleeps however long Slack says; a reply held back
    for minutes is worse than a clear failure, so waits beyond `max_wait` are not retried.
    """

    def __init__(
        self,
        max_retry_count: int,
        max_wait: float,
        on_rate_limited: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(max_retry_count)
        self.max_wait = max_wait
        self.on_rate_limited = on_rate_limited  # counts 429s for the metrics

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        limited = response is not None and response.status_code == 429
        if limited and self.on_rate_limited is not None:
            self.on_rate_limited()
        return limited and response is not None and retry_after(response) <= self.max_wait

    async def prepare_for_next_attempt_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> None:
        state.next_attempt_requested = True
        wait = retry_after(response) if response is not None else 1.0
        log.info("slack rate limited retry_after=%.1f attempt=%d", wait, state.current_attempt + 1)
        await asyncio.sleep(wait + random.uniform(0, 0.2))  # jitter spreads replicas apart
        state.increment_current_attempt()


def retry_after(response: HttpResponse) -> float:
    for name, values in response.headers.items():
        if name.lower() == "retry-after":
            value = values[0] if isinstance(values, list) else values
            try:
                return max(0.0, float(value))
            except ValueError:
                break
    return 1.0


def retry_handlers(
    retries: int, max_wait: float, on_rate_limited: Callable[[], None] | None = None
) -> list[AsyncRetryHandler]:
    return [
        AsyncConnectionErrorRetryHandler(max_retry_count=retries),
        RetryAfterHandler(
            max_retry_count=retries, max_wait=max_wait, on_rate_limited=on_rate_limited
        ),
        AsyncServerErrorRetryHandler(max_retry_count=retries),
    ]


class SlackSender:
    """Renders Outbound messages and performs the Web API calls that deliver them."""

    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client

    async def post(self, out: Outbound) -> SentRef:
        """Post a message (in its thread), split into parts; buttons go on the last part."""
        parts = render_parts(out.text, out.markdown)
        ts = ""
        for n, part in enumerate(parts, 1):
            last = n == len(parts)
            blocks = message_blocks(part, out.buttons) if last and out.buttons else None
            response = await self.call(
                "chat.postMessage",
                self._client.chat_postMessage(
                    channel=out.chat.chat_id,
                    text=part,
                    blocks=blocks,
                    thread_ts=out.chat.thread_id,
                ),
                channel=out.chat.chat_id,
            )
            ts = str(response.get("ts", ""))
        return SentRef(chat=out.chat, message_id=ts)

    async def post_ephemeral(self, out: Outbound, user_id: str) -> SentRef:
        """Post text only `user_id` sees; longer text is cut, as ephemerals are short notices."""
        text = render_parts(out.text, out.markdown, split=False)[0]
        blocks = message_blocks(text, out.buttons) if out.buttons else None
        response = await self.call(
            "chat.postEphemeral",
            self._client.chat_postEphemeral(
                channel=out.chat.chat_id,
                user=user_id,
                text=text,
                blocks=blocks,
                thread_ts=out.chat.thread_id,
            ),
            channel=out.chat.chat_id,
        )
        return SentRef(chat=out.chat, message_id=str(response.get("message_ts", "")))

    async def update(self, ref: SentRef, out: Outbound) -> None:
        """Replace a message's text; buttons not in `out` are removed."""
        text = render_parts(out.text, out.markdown, split=False)[0]
        blocks: Sequence[dict[str, Any]] = (
            message_blocks(text, out.buttons) if out.buttons else [section(text)]
        )
        try:
            await self.call(
                "chat.update",
                self._client.chat_update(
                    channel=ref.chat.chat_id, ts=ref.message_id, text=text, blocks=blocks
                ),
                channel=ref.chat.chat_id,
            )
        except SlackCallFailed as exc:
            if exc.code == "message_not_found":
                raise MessageGone(str(exc)) from None
            raise

    async def delete(self, ref: SentRef) -> None:
        try:
            await self.call(
                "chat.delete",
                self._client.chat_delete(channel=ref.chat.chat_id, ts=ref.message_id),
                channel=ref.chat.chat_id,
            )
        except SlackCallFailed as exc:
            if exc.code != "message_not_found":
                raise

    # -- the stream methods (chat.startStream / appendStream / stopStream) -----------------

    async def start_stream(
        self, chat: ChatRef, recipient: UserRef | None, chunks: list[Chunk]
    ) -> str:
        """Start a streamed reply in `chat`'s thread; returns its ts."""
        assert chat.thread_id is not None
        recipients: dict[str, str] = {}
        if recipient is not None and chat.kind is not ChatKind.DIRECT:
            # Required outside DMs: the person the reply is streamed to.
            recipients["recipient_user_id"] = recipient.user_id
            if chat.space_id:
                recipients["recipient_team_id"] = chat.space_id
        response = await self.call(
            "chat.startStream",
            self._client.chat_startStream(
                channel=chat.chat_id, thread_ts=chat.thread_id, chunks=chunks, **recipients
            ),
            channel=chat.chat_id,
        )
        return str(response.get("ts", ""))

    async def append_stream(self, ref: SentRef, chunks: list[Chunk]) -> None:
        await self.call(
            "chat.appendStream",
            self._client.chat_appendStream(
                channel=ref.chat.chat_id, ts=ref.message_id, chunks=chunks
            ),
            channel=ref.chat.chat_id,
        )

    async def stop_stream(self, ref: SentRef, chunks: list[Chunk]) -> None:
        await self.call(
            "chat.stopStream",
            self._client.chat_stopStream(
                channel=ref.chat.chat_id, ts=ref.message_id, chunks=chunks or None
            ),
            channel=ref.chat.chat_id,
        )

    async def react(self, channel: str, ts: str, emoji: str, *, add: bool) -> None:
        if add:
            call = self._client.reactions_add(channel=channel, timestamp=ts, name=emoji)
        else:
            call = self._client.reactions_remove(channel=channel, timestamp=ts, name=emoji)
        await self.call("reactions.add" if add else "reactions.remove", call, channel=channel)

    async def call(
        self, method: str, call: Awaitable[AsyncSlackResponse], *, channel: str = ""
    ) -> AsyncSlackResponse:
        """Await one Web API call (retries are the client's); failures become DeliveryError."""
        try:
            return await call
        except SlackApiError as exc:
            code = str(exc.response.get("error") or f"http_{exc.response.status_code}")
            permanent = code in _PERMANENT
            hint = _HINTS.get(code)
            log.log(
                logging.ERROR if permanent else logging.WARNING,
                "slack call failed method=%s channel=%s error=%s permanent=%s%s",
                method,
                channel,
                code,
                permanent,
                f" hint={hint!r}" if hint else "",
            )
            raise SlackCallFailed(
                f"Slack {method} failed: {code}", code=code, permanent=permanent
            ) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack call failed method=%s channel=%s error=%r", method, channel, exc)
            raise DeliveryError(f"Slack {method} failed: {type(exc).__name__}") from None


def render_parts(text: str, markdown: bool, *, split: bool = True) -> list[str]:
    """The text as mrkdwn parts of at most MAX_TEXT characters (one, cut short, if not split)."""
    rendered = to_mrkdwn(text) if markdown else escape(text)
    if not rendered.strip():
        rendered = "…"  # Slack refuses an empty message
    if split:
        return split_text(rendered, MAX_TEXT)
    if len(rendered) > MAX_TEXT:
        rendered = rendered[: MAX_TEXT - 1] + "…"
    return [rendered]
