"""How far the event loop runs behind: measured on the loop, read from the lease renewal thread.

A task sleeps a fixed tick and notes how late it woke (`event_loop_lag_seconds`). The lease
renewal thread asks `stalled_for` (how long since the loop last ran that task) to tell a busy
process, whose leases it keeps, from a stuck one, whose leases it lets lapse; the session
queue asks `lagging` before it claims new work.
"""

from __future__ import annotations

import asyncio
import time

from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_task

TICK = 0.25  # seconds between measurements


class LoopLag:
    def __init__(self, metrics: Metrics, limit: float) -> None:
        self._metrics = metrics
        self.limit = limit
        self.lag = 0.0  # how late the last tick woke, in seconds
        self._ran_at = time.monotonic()  # read by another thread: one float, replaced whole
        self._task: asyncio.Task[None] | None = None

    def stalled_for(self) -> float:
        """Seconds the loop has gone without running its tick beyond the tick itself (any
        thread may ask)."""
        return max(time.monotonic() - self._ran_at - TICK, 0.0)

    @property
    def lagging(self) -> bool:
        return max(self.lag, self.stalled_for()) > self.limit

    def start(self) -> None:
        self._ran_at = time.monotonic()
        self._task = asyncio.create_task(self._measure(), name="event loop lag")

    async def stop(self) -> None:
        await stop_task(self._task)

    async def _measure(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            now = time.monotonic()
            self.lag = max(now - self._ran_at - TICK, 0.0)
            self._ran_at = now
            self._metrics.gauge("event_loop_lag_seconds", round(self.lag, 3))
