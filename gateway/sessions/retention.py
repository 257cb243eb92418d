"""History retention (`history.retention_days`): past turns older than that leave the search
index, and conversations idle that long are deleted. One replica sweeps per period."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from gateway.runtime.tasks import stop_task
from gateway.sessions.history import SessionStore
from gateway.sessions.key import SessionKey
from gateway.store import keys
from gateway.store.base import Store, StoreUnavailable
from gateway.store.search import PruneResult

log = logging.getLogger(__name__)

DAY = 86_400.0
SWEEP_EVERY = 6 * 3600.0


class RetentionSweeper:
    def __init__(
        self,
        store: Store,
        sessions: SessionStore,
        *,
        retention_days: float,
        instance_id: str,
        every: float = SWEEP_EVERY,
    ) -> None:
        self._store = store
        self._sessions = sessions
        self._days = retention_days
        self._instance = instance_id
        self._every = every
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._days > 0:
            self._task = asyncio.create_task(self._loop(), name="history retention")

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                await self.sweep_once()
            except StoreUnavailable as exc:
                log.warning("retention sweep skipped error=%s", exc)
            except Exception:
                log.exception("retention sweep failed")
            await asyncio.sleep(self._every)

    async def sweep_once(self, now: float | None = None) -> PruneResult | None:
        """Prune once for the current period; None when another replica already did (or
        retention is off)."""
        if self._days <= 0:
            return None
        now = time.time() if now is None else now
        period = str(int(now // self._every))
        claimed = await self._store.set(
            keys.retention_run(period), self._instance, ttl=2 * self._every, only_if_absent=True
        )
        if not claimed:
            return None
        result = await self._store.search.prune(now - self._days * DAY)
        for session in result.sessions:
            with contextlib.suppress(ValueError):
                await self._sessions.clear(SessionKey.parse(session))
        if result.docs or result.sessions:
            log.info(
                "retention pruned turns=%d conversations=%d", result.docs, len(result.sessions)
            )
        return result
