"""Earlier messages of a Slack conversation, read for a turn: a thread the bot is first
mentioned in (`conversations.replies`), or a channel's history for the read_channel tool
(`conversations.history`). The bot reads only what its token may (channels:history,
groups:history, im:history, mpim:history); a refusal reads nothing."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.normalize import BotIdentity, clean_text
from gateway.sdk import DeliveryError

log = logging.getLogger(__name__)

PAGE = 200  # messages per Web API call
MAX_PAGES = 5  # a thread longer than this many pages is read from its start only
OWN_LABEL = "You (the assistant)"


def as_lines(
    messages: Sequence[dict[str, Any]], bot: BotIdentity, *, max_messages: int, max_chars: int
) -> tuple[str, ...]:
    """`Name: text` lines of people's messages, oldest first: the first one (a thread's
    start) and the newest others, within `max_messages` and `max_chars`."""
    lines = [line for line in (_line(m, bot) for m in messages) if line]
    if max_messages <= 0 or not lines:
        return ()
    first, rest = lines[0], lines[1:]
    rest = rest[-(max_messages - 1) :] if max_messages > 1 else []
    return (first[:max_chars], *_newest_within(rest, max_chars - len(first) - 1))


def _line(message: dict[str, Any], bot: BotIdentity) -> str:
    text = clean_text(str(message.get("text") or ""), bot)
    if not text:
        return ""
    user = str(message.get("user") or "")
    own = user == bot.user_id or message.get("bot_id") == bot.bot_id
    label = OWN_LABEL if own else user or str(message.get("username") or "someone")
    return f"{label}: {text}"


class SlackHistory:
    """Reads conversations through the bot's Web API client."""

    def __init__(self, client: AsyncWebClient, bot: BotIdentity) -> None:
        self._client = client
        self._bot = bot

    async def thread(
        self,
        channel: str,
        thread_ts: str,
        before_ts: str | None,
        *,
        max_messages: int,
        max_chars: int,
    ) -> tuple[str, ...]:
        """The thread's messages (before `before_ts`, the mention), as context lines."""
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            response = await self._call(
                self._client.conversations_replies(
                    channel=channel, ts=thread_ts, limit=PAGE, cursor=cursor
                )
            )
            page = response.get("messages") or []
            messages += [m for m in page if before_ts is None or _before(m, before_ts)]
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not cursor:
                break
        return as_lines(messages, self._bot, max_messages=max_messages, max_chars=max_chars)

    async def channel(
        self, channel: str, *, max_messages: int, max_chars: int, before_ts: str | None = None
    ) -> tuple[str, ...]:
        """The channel's newest messages (before `before_ts`), oldest first."""
        response = await self._call(
            self._client.conversations_history(
                channel=channel, limit=min(max_messages, PAGE), latest=before_ts
            )
        )
        newest_first = list(response.get("messages") or [])
        lines = [_line(m, self._bot) for m in reversed(newest_first)]
        return _newest_within([line for line in lines if line], max_chars)

    async def _call(self, call: Any) -> dict[str, Any]:
        try:
            response = await call
        except SlackApiError as exc:
            code = str(exc.response.get("error") or "error")
            raise DeliveryError(f"Slack refused to read the conversation ({code})") from exc
        data: dict[str, Any] = response.data if isinstance(response.data, dict) else {}
        return data


def _before(message: dict[str, Any], ts: str) -> bool:
    try:
        return float(str(message.get("ts"))) < float(ts)
    except ValueError:
        return False


def _newest_within(lines: list[str], chars: int) -> tuple[str, ...]:
    kept: list[str] = []
    for line in reversed(lines):
        chars -= len(line) + 1
        if chars < 0:
            break
        kept.append(line)
    return tuple(reversed(kept))
