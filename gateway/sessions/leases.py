"""Session leases: one turn at a time per session across every process sharing the store.

This module is the lease's one owner. Leases are taken by the store's inbox operations
(intake, claim, finish: gateway/store/inbox.py), kept alive here by one heartbeat that
renews every lease this process holds in a single round trip, and ended by the turn's
`TurnLease.commit` (its history writes, dropping its message and releasing or passing on
the lease, in one round trip). Leases are short (`router.lease_ttl`, 5 s by default), so a
dead process's sessions are claimed by another within seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable

from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_task
from gateway.sdk.messages import SentRef
from gateway.store import keys
from gateway.store.base import Batch, Store, StoreUnavailable
from gateway.store.inbox import Claimed, FinishResult
from gateway.store.search import SearchDoc

log = logging.getLogger(__name__)

REPLY_TTL = 2 * 86400.0  # a re-run within this long finds the reply already sent


class TurnLease:
    """What one turn runs under: the claimed message, the history read with it, and the
    one round trip that ends the turn."""

    def __init__(
        self,
        store: Store,
        claimed: Claimed,
        ttl: float,
        released: Callable[[str, str], None] = lambda session, owner: None,
    ) -> None:
        self._store = store
        self.claimed = claimed
        self._ttl = ttl
        self._released = released  # told (session, owner) when the commit gave the lease up
        self.record = claimed.record
        self.preloaded = True  # `record` is the stored history (None: a new session)
        self.handing_over = False  # the process is stopping: leave the message for another
        self.result: FinishResult | None = None

    @property
    def session(self) -> str:
        return self.claimed.session

    async def record_reply(self, sent: SentRef, text: str) -> None:
        """Remember that this turn's reply went out, before the turn is marked done, so a
        re-run after a crash never sends it twice."""
        value = json.dumps({"message_id": sent.message_id, "text": text}, ensure_ascii=False)
        await self._store.set(keys.reply(self.claimed.entry.id), value, ttl=REPLY_TTL)

    async def commit(
        self, writes: Batch, record: str | None, index: SearchDoc | None = None
    ) -> None:
        """Write the turn's history and search document, drop its message and keep the lease
        for the session's next message (or release it), in one round trip."""
        self.result = await self._store.finish(
            self.claimed.session,
            self.claimed.entry.id,
            self.claimed.owner,
            writes,
            keep=True,
            lease_ttl=self._ttl,
            record=record,
            index=index,
        )
        if self.result.status != "next":  # nothing left to renew, whatever runs before let_go
            self._released(self.claimed.session, self.claimed.owner)
        if self.result.status == "lost":
            log.warning(
                "session lease lost before the turn was saved session=%s entry=%s",
                self.claimed.session,
                self.claimed.entry.id,
            )


class SessionLeases:
    def __init__(self, store: Store, instance: str, ttl: float, metrics: Metrics) -> None:
        self._store = store
        self._instance = instance
        self.ttl = ttl
        self._metrics = metrics
        self._held: dict[str, str] = {}  # session -> owner token
        self._task: asyncio.Task[None] | None = None

    def new_owner(self) -> str:
        return f"{self._instance}:{uuid.uuid4().hex[:8]}"

    def turn(self, claimed: Claimed) -> TurnLease:
        """Start holding the lease `claimed` came with; the heartbeat renews it from now on."""
        self._held[claimed.session] = claimed.owner
        return TurnLease(self._store, claimed, self.ttl, self._stop_renewing)

    def _stop_renewing(self, session: str, owner: str) -> None:
        # Between a commit that released the lease and let_go, a heartbeat would find it
        # gone and count an expiry that never happened.
        if self._held.get(session) == owner:
            del self._held[session]

    def holds(self, session: str) -> bool:
        return session in self._held

    async def let_go(self, lease: TurnLease) -> None:
        """This process is done with the session: stop renewing. When the turn never
        committed (a shutdown handing it over, a turn that crashed), its message is still
        pending under our lease: release it so another worker can claim it at once."""
        owner = self._held.pop(lease.session, None)
        if owner is None or lease.result is not None:
            return
        try:
            await self._store.finish(
                lease.session, "", owner, Batch(), keep=False, lease_ttl=self.ttl
            )
        except StoreUnavailable as exc:  # it expires on its own within the TTL
            log.warning("lease not handed over session=%s error=%s", lease.session, exc)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._heartbeat(), name="session leases")

    async def stop(self) -> None:
        await stop_task(self._task)

    async def _heartbeat(self) -> None:
        # The first beat comes at once, so the console and doctor see this replica from the
        # start; then a third of the TTL: one late renewal does not lose a lease.
        while True:
            await self._beat()
            await asyncio.sleep(self.ttl / 3)

    async def _beat(self) -> None:
        held = list(self._held.items())
        try:
            renewed = await self._store.renew_sessions(held, self.ttl)
            await self._store.hset(
                keys.REPLICAS,
                self._instance,
                json.dumps({"ts": time.time(), "sessions": len(held)}),
            )
        except StoreUnavailable as exc:
            log.warning("session leases not renewed count=%d error=%s", len(held), exc)
            return
        for (session, owner), ok in zip(held, renewed, strict=True):
            if not ok and self._held.get(session) == owner:
                del self._held[session]
                self._metrics.inc("session_leases_expired_total")
                log.warning("session lease expired while held session=%s", session)
