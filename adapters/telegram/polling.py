"""Long polling that moves Telegram's offset only past updates the gateway has stored.

Telegram forgets an update once a getUpdates call asks for a higher offset, so the offset
here moves past an update only after `UpdateIntake.take` took it; updates fetched but not
taken (the store was down) are fetched again. Only one process polls (a leader lease when
the store is shared): Telegram allows one getUpdates consumer per bot.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random

from telegram import Bot
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError, TimedOut

from adapters.telegram.intake import UpdateIntake

log = logging.getLogger(__name__)

_BACKOFF_START = 1.0
_BACKOFF_MAX = 30.0


class Poller:
    def __init__(self, bot: Bot, intake: UpdateIntake, *, timeout: int, allowed: list[str]) -> None:
        self._bot = bot
        self._intake = intake
        self._timeout = timeout
        self._allowed = allowed
        self._offset: int | None = None
        self._task: asyncio.Task[None] | None = None
        self.problem = ""  # why the last getUpdates failed; empty once one succeeds

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="telegram polling")

    async def stop(self) -> None:
        """Stop polling; confirm what was taken so the next poller does not fetch it again."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._offset is not None:
            with contextlib.suppress(TelegramError):
                await self._bot.get_updates(offset=self._offset, timeout=0)

    async def _run(self) -> None:
        backoff = _BACKOFF_START
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=self._offset,
                    timeout=self._timeout,
                    allowed_updates=self._allowed,
                    read_timeout=self._timeout + 10,
                )
            except RetryAfter as exc:
                await asyncio.sleep(_seconds(exc.retry_after) + 0.5)
                continue
            except TimedOut:
                continue
            except InvalidToken:
                log.error("telegram rejected the bot token; polling stops")
                self.problem = "the bot token was rejected"
                return
            except (Conflict, NetworkError, TelegramError) as exc:
                # 409: another getUpdates consumer (a webhook, another process); or the network.
                log.warning("telegram getUpdates failed error=%s retry_in=%.1fs", exc, backoff)
                self.problem = f"getUpdates failed: {exc}"
                await asyncio.sleep(backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 1.5, _BACKOFF_MAX)
                continue
            backoff = _BACKOFF_START
            self.problem = ""
            if not updates:
                continue
            taken = await self._intake.take(updates)
            if taken:
                self._offset = updates[taken - 1].update_id + 1
            if taken < len(updates):
                log.warning(
                    "telegram updates not stored; fetching them again skipped=%d",
                    len(updates) - taken,
                )
                await asyncio.sleep(_BACKOFF_START)


def _seconds(retry_after: object) -> float:
    total = getattr(retry_after, "total_seconds", None)
    return float(total()) if callable(total) else float(retry_after)  # type: ignore[arg-type]
