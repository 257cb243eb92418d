"""The global cap on turns running in one process: a slot is held from the moment a turn may
start here (intake reserving one, the claimer taking some) until its worker ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque


class Slots:
    """The global cap on turns running in this process; `take_now` never waits."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free = size
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def in_use(self) -> int:
        """Slots held now: turns running here and turns about to start."""
        return self.size - self.free

    def take_now(self) -> bool:
        if self.free > 0 and not self._waiters:
            self.free -= 1
            return True
        return False

    async def take(self) -> None:
        if self.take_now():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot while being cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def take_up_to(self, count: int) -> int:
        """Take up to `count` more slots without waiting; returns how many were taken."""
        taken = min(count, self.free) if not self._waiters else 0
        self.free -= taken
        return taken

    def give(self, count: int = 1) -> None:
        for _ in range(count):
            self._give_one()

    def _give_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1
