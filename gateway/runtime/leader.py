"""Leader election over a store lease: exactly one process runs a singleton job at a time.

Telegram polling, the Discord gateway connection and the scheduler must have one
runner per bot; every replica runs a `LeaderElection` and only the lease holder
runs the job. When the holder dies its lease expires and another takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from gateway.runtime.tasks import stop_task
from gateway.store import keys
from gateway.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)

Hook = Callable[[], Awaitable[None]]


class LeaderElection:
    def __init__(
        self,
        store: Store,
        name: str,
        owner: str,
        *,
        ttl: float = 9.0,
        on_elected: Hook,
        on_deposed: Hook,
    ) -> None:
        self._store = store
        self._name = keys.leader(name)
        self._owner = owner
        self._ttl = ttl
        self._on_elected = on_elected
        self._on_deposed = on_deposed
        self._task: asyncio.Task[None] | None = None
        self.is_leader = False
        self.changed = asyncio.Event()  # set on every change of leadership (for tests, status)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"leader {self._name}")

    async def stop(self) -> None:
        await stop_task(self._task)
        if self.is_leader:
            await self._step_down()
            # Release at once so another replica takes over without waiting for the TTL.
            with contextlib.suppress(StoreUnavailable):
                await self._store.release_lease(self._name, self._owner)

    async def _run(self) -> None:
        # Renew at a third of the TTL so one missed beat does not lose the lease.
        interval = self._ttl / 3
        while True:
            try:
                if self.is_leader:
                    if not await self._store.renew_lease(self._name, self._owner, self._ttl):
                        log.warning("leadership lost lease=%s", self._name)
                        await self._step_down()
                elif await self._store.acquire_lease(self._name, self._owner, self._ttl):
                    log.info("leadership taken lease=%s owner=%s", self._name, self._owner)
                    self.is_leader = True
                    self.changed.set()
                    try:
                        await self._on_elected()
                    except Exception:
                        log.exception("starting as leader failed lease=%s", self._name)
                        await self._step_down()
                        await self._store.release_lease(self._name, self._owner)
            except StoreUnavailable as exc:
                log.warning("leader lease unreachable lease=%s error=%s", self._name, exc)
                if self.is_leader:
                    # We cannot prove we still hold it; stop before someone else starts.
                    await self._step_down()
            await asyncio.sleep(interval)

    async def _step_down(self) -> None:
        self.is_leader = False
        self.changed.set()
        try:
            await self._on_deposed()
        except Exception:
            log.exception("stepping down failed lease=%s", self._name)
