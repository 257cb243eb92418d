"""Session leases: one turn at a time per session across every process sharing the store.

A turn runs while its process holds the session's lease; the history is read in the
same round trip as the lease is taken, and saving it releases the lease (history.py).
With a store no other process shares, the router's per-session worker already
serialises turns and no lease is taken at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from gateway.history import LeaseHandle, SessionStore
from gateway.sessions import SessionKey
from gateway.store.base import Batch, Store, StoreUnavailable
from gateway.turns import TurnRequest

log = logging.getLogger(__name__)


def lease_name(key: SessionKey) -> str:
    return f"lease:session:{key}"


@dataclass
class LeaseProbe:
    """Store work done in the access check's round trip.

    A session idle here is probably idle everywhere, so its lease is taken (and its
    history read) right away: a message that starts a turn then needs no round trip of
    its own for them. A session busy here only has its lease holder read, to know whether
    a turn (perhaps waiting for an answer) runs in another process.
    """

    batch: Batch
    lease: LeaseHandle | None  # set when trying to take the lease
    held: LeaseHandle | None = None
    record: str | None = None
    busy_elsewhere: bool = False
    used: bool = False

    def read(self, results: list[Any]) -> None:
        if not results:  # refused before the store was asked
            return
        if self.lease is None:
            self.busy_elsewhere = results[0] is not None
        elif results[0]:
            self.held, self.record = self.lease, results[1]
        else:
            self.busy_elsewhere = True

    def hand_to(self, request: TurnRequest) -> None:
        """The turn about to start takes over the lease and the history read with it."""
        assert self.held is not None
        self.used = True
        request.turn_id = self.held.owner.rsplit(":", 1)[1]
        request.lease = self.held
        request.preloaded = (self.record,)


class SessionLeases:
    def __init__(self, store: Store, instance: str, ttl: float) -> None:
        self._store = store
        self._instance = instance
        self._ttl = ttl

    def probe(self, key: SessionKey, *, idle_here: bool, want_holder: bool) -> LeaseProbe | None:
        if not self._store.shared:
            return None
        if idle_here:
            lease = LeaseHandle(lease_name(key), f"{self._instance}:{uuid.uuid4().hex[:12]}")
            batch = Batch().acquire_lease(lease.name, lease.owner, self._ttl)
            return LeaseProbe(batch.get(SessionStore.store_key(key)), lease)
        return LeaseProbe(Batch().lease_owner(lease_name(key)), None) if want_holder else None

    async def drop(self, probe: LeaseProbe | None) -> None:
        """Release a lease a probe took for a turn that did not start (a command, ...)."""
        if probe is not None and probe.held is not None and not probe.used:
            with contextlib.suppress(StoreUnavailable):
                await self._store.release_lease(probe.held.name, probe.held.owner)

    @contextlib.asynccontextmanager
    async def hold(self, key: SessionKey, request: TurnRequest) -> AsyncIterator[None]:
        """Hold the session's lease for the turn, waiting while another process has it."""
        if not self._store.shared:
            yield
            return
        if request.lease is None:
            await self._acquire(key, request)
        assert request.lease is not None
        async with self._holding(request.lease):
            yield

    async def _acquire(self, key: SessionKey, request: TurnRequest) -> None:
        lease = LeaseHandle(lease_name(key), f"{self._instance}:{request.turn_id}")
        batch = Batch().acquire_lease(lease.name, lease.owner, self._ttl)
        batch.get(SessionStore.store_key(key))
        delay = 0.02
        while True:
            try:
                acquired, record = await self._store.run(batch)
                if acquired:
                    request.preloaded = (record,)
                    request.lease = lease
                    return
            except StoreUnavailable as exc:
                log.warning("lease unavailable session=%s error=%s", key, exc)
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)

    @contextlib.asynccontextmanager
    async def _holding(self, lease: LeaseHandle) -> AsyncIterator[None]:
        """Keep a held lease alive for the turn; release it unless saving already did."""
        renew = asyncio.create_task(self._renew(lease))
        try:
            yield
        finally:
            renew.cancel()  # it only sleeps between renewals; no need to wait for it
            if not lease.released:
                with contextlib.suppress(Exception):
                    await self._store.release_lease(lease.name, lease.owner)

    async def _renew(self, lease: LeaseHandle) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)
            try:
                if not await self._store.renew_lease(lease.name, lease.owner, self._ttl):
                    log.warning("session lease lost lease=%s", lease.name)
            except StoreUnavailable as exc:
                log.warning("lease renewal failed lease=%s error=%s", lease.name, exc)
