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

from telegram import Bot
from telegram.error import Conflict, InvalidToken, NetworkError, RetryAfter, TelegramError, TimedOut

from adapters.telegram.intake import UpdateIntake
from adapters.telegram.sending import retry_after_seconds
from gateway.sdk import SPREAD, Backoff, stop_task

log = logging.getLogger(__name__)

# After a failed getUpdates: 1 s, then half as long again each time, at most 30 s.
_BACKOFF = Backoff(1.0, cap=30.0, factor=1.5, jitter=SPREAD)
_NOT_STORED_PAUSE = 1.0  # before fetching again updates the store could not take


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
        await stop_task(task)
        if self._offset is not None:
            with contextlib.suppress(TelegramError):
                await self._bot.get_updates(offset=self._offset, timeout=0)

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                updates = await self._bot.get_updates(
                    offset=self._offset,
                    timeout=self._timeout,
                    allowed_updates=self._allowed,
                    read_timeout=self._timeout + 10,
                )
            except RetryAfter as exc:
                await _BACKOFF.wait(failures, asked=retry_after_seconds(exc) + 0.5)
                continue
            except TimedOut:
                continue
            except InvalidToken:
                log.error("telegram rejected the bot token; polling stops")
                self.problem = "the bot token was rejected"
                return
            except (Conflict, NetworkError, TelegramError) as exc:
                # 409: another getUpdates consumer (a webhook, another process); or the network.
                failures += 1
                delay = _BACKOFF.delay(failures)
                log.warning("telegram getUpdates failed error=%s retry_in=%.1fs", exc, delay)
                self.problem = f"getUpdates failed: {exc}"
                await asyncio.sleep(delay)
                continue
            failures = 0
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
                await asyncio.sleep(_NOT_STORED_PAUSE)
