"""Session leases: one turn at a time per session across every process sharing the store.

This module is the lease's one owner: it takes it (during intake, in the same round trip
as the dedupe check, or later in the session's worker), renews it while the turn runs,
and releases it, in the same round trip as the turn's history writes (`TurnLease.commit`).
With a store no other process shares, the session queue already serialises turns and no
lease is taken at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from gateway import keys
from gateway.sessions import SessionKey
from gateway.store.base import Batch, Store, StoreUnavailable

log = logging.getLogger(__name__)


@dataclass
class LeaseHandle:
    """A session lease this process holds (owner token `instance:turn_id`)."""

    name: str
    owner: str
    adopted: bool = False  # a turn runs under it; whoever took it must not release it
    released: bool = False


@dataclass(frozen=True)
class LeaseProbe:
    """Lease operations to run in the intake round trip, and how to read their results.

    A session idle here is probably idle everywhere, so its lease is taken (and its
    history read) right away: a message that starts a turn then needs no round trip of
    its own for them. A session busy here only has its lease holder read, to know whether
    a turn (perhaps waiting for an answer) runs in another process.
    """

    ops: Batch
    lease: LeaseHandle | None  # set when trying to take the lease

    def read(self, results: list[Any]) -> tuple[LeaseHandle | None, str | None, bool]:
        """(lease taken, the session's stored record, busy in another process)."""
        if self.lease is None:
            return None, None, results[0] is not None
        if results[0]:
            return self.lease, results[1], False
        return None, None, True


class TurnLease:
    """What a turn runs under: the lease (if any), the history read with it, and the one
    round trip that ends the turn: its writes plus the release."""

    def __init__(
        self, store: Store, handle: LeaseHandle | None, record: str | None, preloaded: bool
    ) -> None:
        self._store = store
        self._handle = handle
        self.record = record
        self.preloaded = preloaded  # `record` is the stored history (None: a new session)

    async def commit(self, writes: Batch) -> None:
        """Run the turn's writes and release the lease in one round trip."""
        if self._handle is not None and not self._handle.released:
            writes.release_lease(self._handle.name, self._handle.owner)
            await self._store.run(writes)
            self._handle.released = True
        elif writes.ops:
            await self._store.run(writes)


class SessionLeases:
    def __init__(self, store: Store, instance: str, ttl: float) -> None:
        self._store = store
        self._instance = instance
        self._ttl = ttl

    def probe(
        self, key: SessionKey, turn_id: str, *, idle_here: bool, want_holder: bool
    ) -> LeaseProbe | None:
        if not self._store.shared:
            return None
        if idle_here:
            lease = self._handle(key, turn_id)
            ops = Batch().acquire_lease(lease.name, lease.owner, self._ttl).get(keys.session(key))
            return LeaseProbe(ops, lease)
        if want_holder:
            return LeaseProbe(Batch().lease_owner(keys.session_lease(key)), None)
        return None

    @staticmethod
    def adopt(lease: LeaseHandle) -> None:
        """The turn about to start runs under this lease (taken during intake)."""
        lease.adopted = True

    async def release_unadopted(self, lease: LeaseHandle | None) -> None:
        """Release a lease intake took for a message that started no turn (a command, ...)."""
        if lease is not None and not lease.adopted and not lease.released:
            with contextlib.suppress(StoreUnavailable):
                await self._store.release_lease(lease.name, lease.owner)
            lease.released = True

    @contextlib.asynccontextmanager
    async def hold(
        self, key: SessionKey, turn_id: str, lease: LeaseHandle | None, record: str | None
    ) -> AsyncIterator[TurnLease]:
        """Hold the session's lease for a turn, waiting while another process has it."""
        if not self._store.shared:
            yield TurnLease(self._store, None, None, preloaded=False)
            return
        if lease is None:
            lease, record = await self._acquire(key, turn_id)
        renew = asyncio.create_task(self._renew(lease))
        try:
            yield TurnLease(self._store, lease, record, preloaded=True)
        finally:
            renew.cancel()  # it only sleeps between renewals; no need to wait for it
            if not lease.released:
                with contextlib.suppress(Exception):
                    await self._store.release_lease(lease.name, lease.owner)
                lease.released = True

    def _handle(self, key: SessionKey, turn_id: str) -> LeaseHandle:
        return LeaseHandle(keys.session_lease(key), f"{self._instance}:{turn_id}")

    async def _acquire(self, key: SessionKey, turn_id: str) -> tuple[LeaseHandle, str | None]:
        lease = self._handle(key, turn_id)
        batch = Batch().acquire_lease(lease.name, lease.owner, self._ttl).get(keys.session(key))
        delay = 0.02
        while True:
            try:
                acquired, record = await self._store.run(batch)
                if acquired:
                    return lease, record
            except StoreUnavailable as exc:
                log.warning("lease unavailable session=%s error=%s", key, exc)
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)

    async def _renew(self, lease: LeaseHandle) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                if not await self._store.renew_lease(lease.name, lease.owner, self._ttl):
                    log.warning("session lease lost lease=%s", lease.name)
            except StoreUnavailable as exc:
                log.warning("lease renewal failed lease=%s error=%s", lease.name, exc)
