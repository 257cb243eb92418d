"""Session leases: one turn at a time per session across every process sharing the store.

This module is the lease's one owner. Leases are taken by the store's inbox operations
(intake, claim, finish: gateway/store/inbox.py), each take bumping the session's fence, so
the run holds a token no later run shares. They are kept alive by the lease renewal thread
(gateway/sessions/lease_renewal.py), which renews every lease this process holds in one round trip
whatever the event loop is doing, and ended by one of the run's transitions
(gateway/turn/states.py `TurnRun`: commit, dead_letter or release, each one round trip).
Every effect of a turn goes through its `TurnRun`, which has the store check the token in
the same step; a run whose session was taken over meets `StaleTurn` at its next effect.
Leases are short (`router.lease_ttl`, 5 s by default), so a dead or stuck process's sessions
are claimed by another within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator

from gateway.runtime.loop_lag import LoopLag
from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_task
from gateway.sessions.lease_renewal import LeaseRenewalThread
from gateway.store import keys
from gateway.store.base import Store, StoreUnavailable
from gateway.store.inbox import Claimed, HeldLease
from gateway.turn.states import TurnLife, TurnRun

log = logging.getLogger(__name__)


class SessionLeases:
    def __init__(
        self,
        store: Store,
        instance: str,
        ttl: float,
        metrics: Metrics,
        *,
        loop_lag: LoopLag | None = None,
        stuck_after: float = 30.0,
    ) -> None:
        self._store = store
        self._instance = instance
        self.ttl = ttl
        self._metrics = metrics
        self.loop_lag = loop_lag or LoopLag(metrics, limit=1.0)
        self._stuck_after = stuck_after
        self._held: dict[str, TurnRun] = {}  # session -> the run holding its lease here
        self._lock = threading.Lock()  # the renewal thread reads `_held`
        self._task: asyncio.Task[None] | None = None
        self._renewal: LeaseRenewalThread | None = None
        self._paused = 0

    def new_owner(self) -> str:
        return f"{self._instance}:{uuid.uuid4().hex[:8]}"

    def turn(self, claimed: Claimed, life: TurnLife | None = None) -> TurnRun:
        """Start holding the lease `claimed` came with; it is renewed from now on. `life`:
        the state the message's intake ticket took it to (gateway/sessions/stored.py)."""
        run = TurnRun(self._store, claimed, self, life)
        with self._lock:
            self._held[claimed.session] = run
        return run

    def stop_renewing(self, run: TurnRun) -> None:
        # Between a commit that released the lease and let_go, a renewal would find it gone
        # and count an expiry that never happened.
        with self._lock:
            if self._held.get(run.session) is run:
                del self._held[run.session]

    def stopped_stale(self, run: TurnRun, effect: str) -> None:
        self.stop_renewing(run)
        self._metrics.inc("turns_stale_stopped_total")
        log.warning(
            "stale turn stopped: its session was taken over session=%s entry=%s token=%d before=%s",
            run.session,
            run.claimed.entry.id,
            run.token,
            effect,
        )

    def holds(self, session: str) -> bool:
        return session in self._held

    async def let_go(self, run: TurnRun) -> None:
        """This process is done with the session: stop renewing. When the turn never
        committed (a shutdown handing it over, a turn that crashed, an intake ticket whose
        turn did not start), its message is still pending under our lease: release it so
        another worker can claim it at once."""
        with self._lock:
            ours = self._held.get(run.session) is run
            if ours:
                del self._held[run.session]
        if not ours:
            return
        try:
            await run.release()
        except StoreUnavailable as exc:  # it expires on its own within the TTL
            log.warning("lease not handed over session=%s error=%s", run.session, exc)

    async def start(self) -> None:
        self.loop_lag.start()
        open_twin = self._store.lease_renewal_twin()
        if open_twin is not None:
            self._renewal = LeaseRenewalThread(
                open_twin,
                self._store,
                ttl=self.ttl,
                stuck_after=self._stuck_after,
                loop_lag=self.loop_lag,
                held=self._snapshot,
                lost=self._lost,
            )
            self._renewal.start()
        self._task = asyncio.create_task(self._heartbeat(), name="session leases")

    async def stop(self) -> None:
        await stop_task(self._task)
        if self._renewal is not None:
            await self._renewal.stop()
        await self.loop_lag.stop()

    @contextlib.contextmanager
    def renewals_paused(self) -> Iterator[None]:
        """Renew nothing while inside, as a stuck process would not: a rehearsal of a
        take-over (the failover tests make a live run's lease lapse with it)."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def _snapshot(self) -> list[HeldLease]:
        if self._paused:
            return []
        with self._lock:
            return [lease.held() for lease in self._held.values()]

    def _lost(self, leases: list[HeldLease]) -> None:
        """Leases another run took over (the renewal found their fence moved on)."""
        for held in leases:
            with self._lock:
                lease = self._held.get(held.session)
                if lease is None or lease.held() != held or lease.finishing:
                    continue
                del self._held[held.session]
            lease.mark_stale()  # its next effect stops it (and counts it)
            self._metrics.inc("session_leases_expired_total")
            log.warning("session lease expired while held session=%s", held.session)

    async def _heartbeat(self) -> None:
        # The replica's heartbeat for the console and doctor: the first at once, then every
        # third of the TTL. Without a renewal thread (a store that offers none, or one that
        # failed) it also renews the leases, on this loop.
        while True:
            await self._beat()
            await asyncio.sleep(self.ttl / 3)

    async def _beat(self) -> None:
        held = self._snapshot()
        try:
            if held and (self._renewal is None or not self._renewal.alive):
                renewed = await self._store.renew_sessions(held, self.ttl)
                self._lost([h for h, ok in zip(held, renewed, strict=True) if not ok])
            await self._store.hset(
                keys.REPLICAS,
                self._instance,
                json.dumps({"ts": time.time(), "sessions": len(held)}),
            )
        except StoreUnavailable as exc:
            log.warning("session leases not renewed count=%d error=%s", len(held), exc)
