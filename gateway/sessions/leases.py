"""Session leases: one turn at a time per session across every process sharing the store.

This module is the lease's one owner. Leases are taken by the store's inbox operations
(intake, claim, finish: gateway/store/inbox.py), each take bumping the session's fence, so
the run holds a token no later run shares. They are kept alive by the lease renewal thread
(gateway/sessions/lease_renewal.py), which renews every lease this process holds in one round trip
whatever the event loop is doing, and ended by the turn's `TurnLease.commit` (its history
writes, dropping its message and releasing or passing on the lease, in one round trip).
Every effect of a turn goes through its `TurnLease`, which has the store check the token in
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
from gateway.sdk.messages import SentRef
from gateway.sessions.fencing import StaleTurn
from gateway.sessions.lease_renewal import LeaseRenewalThread
from gateway.store import keys
from gateway.store.base import Batch, Store, StoreUnavailable
from gateway.store.inbox import Claimed, FinishResult, HeldLease, InboxEntry
from gateway.store.search import SearchDoc
from gateway.turn.states import IllegalTransition, TurnLife, TurnState

log = logging.getLogger(__name__)

REPLY_TTL = 2 * 86400.0  # a re-run within this long finds the reply slot already claimed


class TurnLease:
    """What one run of a turn holds: the claimed message, the history read with it, and its
    fencing token; every effect of the run goes through here and is checked in the store."""

    def __init__(self, store: Store, claimed: Claimed, ttl: float, leases: SessionLeases) -> None:
        self._store = store
        self.claimed = claimed
        self._ttl = ttl
        self._leases = leases
        self.record = claimed.record
        self.preloaded = True  # `record` is the stored history (None: a new session)
        self.handing_over = False  # the process is stopping: leave the message for another
        self.result: FinishResult | None = None
        self.life = TurnLife()  # claimed: the store step that made this run took the lease
        self._stopped = False  # the stop was counted
        # The finishing store step is under way: its own answer says whether the run still
        # held the session, and a renewal that finds the lease gone meanwhile proves nothing
        # (the step releases it and moves the fence on).
        self.finishing = False
        # Later messages of the session this run took in (steered or merged): its commit
        # drops them with its own, so a crash before it leaves them for the re-run.
        self.absorbed: list[str] = []

    @property
    def session(self) -> str:
        return self.claimed.session

    @property
    def token(self) -> int:
        return self.claimed.token

    @property
    def stale(self) -> bool:
        """Another run took the session over: this one does nothing more."""
        return self.life.state is TurnState.STALE

    def mark_stale(self) -> None:
        if self.life.may("stale"):
            self.life.move("stale")

    def start(self) -> None:
        self.life.move("start")

    def held(self) -> HeldLease:
        return HeldLease(self.claimed.session, self.claimed.owner, self.claimed.token)

    def _stop(self, effect: str) -> StaleTurn:
        """Mark the run stale (counted once) and say so."""
        self.mark_stale()
        if not self._stopped:
            self._stopped = True
            self._leases.stopped_stale(self, effect)
        return StaleTurn(self.session, self.token, effect)

    async def check(self, effect: str) -> None:
        """Stop here (StaleTurn) when another run has taken the session over."""
        if self.stale or not await self._store.fenced_write(self.session, self.token, Batch()):
            raise self._stop(effect)

    async def write(self, writes: Batch, effect: str) -> None:
        """Run `writes` only while this run still holds the session, in one store step."""
        if self.stale or not await self._store.fenced_write(self.session, self.token, writes):
            raise self._stop(effect)

    async def claim_reply(self) -> str | None:
        """Claim the message's reply slot before anything is sent, checking the token in the
        same step: None means send now. When an earlier run claimed it, its record comes back
        and nothing may be sent; when this run is stale, StaleTurn."""
        if self.life.state is TurnState.REPLIED:
            return None
        if self.stale:
            raise self._stop("reply")
        claim = await self._store.claim_reply(
            self.session,
            self.token,
            self.claimed.entry.id,
            json.dumps({"claimed_by": self.token}),
            REPLY_TTL,
        )
        if claim.status == "stale":
            raise self._stop("reply")
        if claim.status == "taken":
            return claim.existing
        self.life.move("reply")
        return None

    async def record_reply(self, sent: SentRef, text: str) -> None:
        """Fill the claimed slot with what went out, so a re-run after a crash saves the
        conversation with it instead of counting the reply as lost."""
        record: dict[str, object] = {
            "message_id": sent.message_id,
            "text": text,
            "claimed_by": self.token,
        }
        if self.absorbed:
            record["absorbed"] = self.absorbed
        value = json.dumps(record, ensure_ascii=False)
        await self._store.record_reply(self.session, self.claimed.entry.id, value, REPLY_TTL)

    async def pending(self) -> list[InboxEntry]:
        """The session's stored messages, this run's own first."""
        return await self._store.pending(self.session)

    async def commit(
        self, writes: Batch, record: str | None, index: SearchDoc | None = None
    ) -> None:
        """Write the turn's history and search document, drop its message and keep the lease
        for the session's next message (or release it), in one round trip; nothing is written
        (StaleTurn) when another run took the session over."""
        await self._finish("commit", writes, record, index, tuple(self.absorbed))

    async def dead_letter(self, writes: Batch) -> None:
        """Drop the message from the inbox with `writes` (its dead-letter record) in the same
        step, history unchanged; StaleTurn when another run took the session over."""
        # What it absorbed stays: each of those messages runs as a turn of its own.
        await self._finish("dead_letter", writes, self.record, None, ())

    async def _finish(
        self,
        transition: str,
        writes: Batch,
        record: str | None,
        index: SearchDoc | None,
        absorbed: tuple[str, ...],
    ) -> None:
        if self.stale:
            raise self._stop(transition)
        if not self.life.may(transition):
            raise IllegalTransition(f"{transition} from {self.life.state.value}")
        self.finishing = True
        try:
            self.result = await self._store.finish(
                self.claimed.session,
                self.claimed.entry.id,
                self.claimed.owner,
                writes,
                keep=True,
                lease_ttl=self._ttl,
                record=record,
                index=index,
                token=self.token,
                absorbed=absorbed,
            )
        finally:
            self.finishing = False
        if self.result.status != "next":  # nothing left to renew, whatever runs before let_go
            self._leases.stop_renewing(self)
        if self.result.status == "lost":
            raise self._stop(transition)
        self.life.move(transition)


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
        self._held: dict[str, TurnLease] = {}  # session -> the run holding its lease here
        self._lock = threading.Lock()  # the renewal thread reads `_held`
        self._task: asyncio.Task[None] | None = None
        self._renewal: LeaseRenewalThread | None = None
        self._paused = 0

    def new_owner(self) -> str:
        return f"{self._instance}:{uuid.uuid4().hex[:8]}"

    def turn(self, claimed: Claimed) -> TurnLease:
        """Start holding the lease `claimed` came with; it is renewed from now on."""
        lease = TurnLease(self._store, claimed, self.ttl, self)
        with self._lock:
            self._held[claimed.session] = lease
        return lease

    def stop_renewing(self, lease: TurnLease) -> None:
        # Between a commit that released the lease and let_go, a renewal would find it gone
        # and count an expiry that never happened.
        with self._lock:
            if self._held.get(lease.session) is lease:
                del self._held[lease.session]

    def stopped_stale(self, lease: TurnLease, effect: str) -> None:
        self.stop_renewing(lease)
        self._metrics.inc("turns_stale_stopped_total")
        log.warning(
            "stale turn stopped: its session was taken over session=%s entry=%s token=%d before=%s",
            lease.session,
            lease.claimed.entry.id,
            lease.token,
            effect,
        )

    def holds(self, session: str) -> bool:
        return session in self._held

    async def let_go(self, lease: TurnLease) -> None:
        """This process is done with the session: stop renewing. When the turn never
        committed (a shutdown handing it over, a turn that crashed), its message is still
        pending under our lease: release it so another worker can claim it at once."""
        with self._lock:
            ours = self._held.get(lease.session) is lease
            if ours:
                del self._held[lease.session]
        if not ours or lease.result is not None or not lease.life.may("release"):
            return
        lease.life.move("release")
        try:
            await self._store.finish(
                lease.session,
                "",
                lease.claimed.owner,
                Batch(),
                keep=False,
                lease_ttl=self.ttl,
                token=lease.token,
            )
        except StoreUnavailable as exc:  # it expires on its own within the TTL
            log.warning("lease not handed over session=%s error=%s", lease.session, exc)

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
