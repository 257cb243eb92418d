"""Per-chat lanes: messages of one chat are submitted in order, different chats concurrently.

PTB processes updates one at a time; handing each to a lane keeps that loop free (a
submit may send a notice or run a command) without reordering a conversation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[object]]


class Lanes:
    def __init__(self) -> None:
        self._tails: dict[str, asyncio.Task[None]] = {}

    def run(self, key: str, job: Job) -> None:
        """Run `job` after every job already queued under `key`; returns at once."""
        previous = self._tails.get(key)
        task = asyncio.create_task(self._after(previous, job), name=f"telegram lane {key}")
        self._tails[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))

    async def drain(self, seconds: float) -> None:
        """Let queued jobs finish for up to `seconds`, then cancel the rest."""
        tasks = list(self._tails.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=seconds)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def __len__(self) -> int:
        return len(self._tails)

    def _forget(self, key: str, done: asyncio.Task[None]) -> None:
        if self._tails.get(key) is done:
            del self._tails[key]

    @staticmethod
    async def _after(previous: asyncio.Task[None] | None, job: Job) -> None:
        if previous is not None:
            # Wait for its end, not its result: its own failure was logged where it happened.
            await asyncio.wait([previous])
        try:
            await job()
        except Exception:
            log.exception("telegram message handling failed")
