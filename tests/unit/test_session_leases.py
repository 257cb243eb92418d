"""Session leases on their own (sessions/leases.py, sessions/lease_renewal.py) on a real
redis-server and the embedded store: a live process keeps its leases while its event loop is
blocked, a stuck one loses them, and a run whose lease was taken over is fenced off."""

from __future__ import annotations

import asyncio
import time

import pytest

from gateway.runtime.loop_lag import LoopLag
from gateway.runtime.metrics import Metrics
from gateway.sessions.fencing import StaleTurn
from gateway.sessions.leases import SessionLeases
from gateway.store import keys
from gateway.store.base import Batch, Store
from gateway.store.inbox import InboxEntry, IntakeRequest
from tests.harness import eventually

S1 = "telegram:1"
TTL = 1.0


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("cluster", marks=pytest.mark.redis),
        "embedded",
    ]
)
def store(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


def intake(owner: str) -> IntakeRequest:
    return IntakeRequest(
        session=S1,
        entry=InboxEntry(f"{S1}-e1", '{"text": "hi"}'),
        seen=None,
        seen_ttl=60,
        max_queued=10,
        max_total=100,
        lease_owner=owner,
        lease_ttl=TTL,
    )


def block_the_loop(seconds: float) -> None:
    """A process whose event loop runs nothing for a while (a blocking call, a CPU burst)."""
    time.sleep(seconds)


def leases_for(store: Store, metrics: Metrics, *, stuck_after: float) -> SessionLeases:
    return SessionLeases(
        store,
        "a",
        TTL,
        metrics,
        loop_lag=LoopLag(metrics, limit=0.5),
        stuck_after=stuck_after,
    )


async def test_a_blocked_event_loop_keeps_its_leases(store: Store) -> None:
    metrics = Metrics()
    leases = leases_for(store, metrics, stuck_after=30)
    await leases.start()
    try:
        claimed = (await store.intake(intake(leases.new_owner()))).claimed
        assert claimed is not None
        lease = leases.turn(claimed)
        block_the_loop(3 * TTL)  # no task of the loop could renew the lease meanwhile
        assert await store.claim("b:1", 5) == []  # still held: nobody takes a live run over
        await lease.check("a test effect")  # and the run may go on
        # The stall shows as the loop's lag once the loop runs again.
        await eventually(lambda: metrics.counter("event_loop_lag_seconds") >= 2 * TTL, 5)
    finally:
        await leases.stop()
    assert metrics.total("session_leases_expired_total") == 0


async def test_a_stuck_loop_loses_its_leases_and_its_late_effects_are_fenced_off(
    store: Store,
) -> None:
    metrics = Metrics()
    leases = leases_for(store, metrics, stuck_after=0.5)
    await leases.start()
    try:
        claimed = (await store.intake(intake(leases.new_owner()))).claimed
        assert claimed is not None
        lease = leases.turn(claimed)
        block_the_loop(3 * TTL)  # stuck well past stuck_after: the renewals stop
        (taken,) = await store.claim("b:1", 5)
        assert taken.session == S1 and taken.token > lease.token
        with pytest.raises(StaleTurn):
            await lease.claim_reply()
        with pytest.raises(StaleTurn):
            await lease.write(Batch().set("approval:x", "1", ttl=60), "approval")
        with pytest.raises(StaleTurn):
            await lease.commit(Batch().set(keys.session(S1), "late"), None)
        assert await store.get("approval:x") is None
        assert await store.get(keys.session(S1)) is None
    finally:
        await leases.stop()
    assert metrics.total("turns_stale_stopped_total") == 1  # one run, counted once


async def test_a_renewal_finds_a_take_over_and_the_runs_next_effect_stops(store: Store) -> None:
    metrics = Metrics()
    leases = leases_for(store, metrics, stuck_after=30)
    await leases.start()
    try:
        claimed = (await store.intake(intake(leases.new_owner()))).claimed
        assert claimed is not None
        lease = leases.turn(claimed)
        with leases.renewals_paused():
            await asyncio.sleep(TTL + 0.2)
            (taken,) = await store.claim("b:1", 5)  # another process takes the session
        assert taken.token > lease.token
        with pytest.raises(StaleTurn):
            await lease.check("tool read_file")
        assert not leases.holds(S1)
    finally:
        await leases.stop()
    assert metrics.total("turns_stale_stopped_total") == 1


class FinishHeldOpen:
    """The store, but each finish waits on `go` after it ran: the window in which the
    renewal thread's answer about a lease the finish just released reaches the loop."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.finished = asyncio.Event()
        self.go = asyncio.Event()

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def finish(self, *args: object, **kwargs: object) -> object:
        result = await self._store.finish(*args, **kwargs)  # type: ignore[arg-type]
        self.finished.set()
        await self.go.wait()
        return result


async def test_a_renewal_that_misses_a_lease_its_commit_released_stops_nothing(
    store: Store,
) -> None:
    """A commit releases the lease and moves the fence on; the renewal thread, working from a
    snapshot taken before, finds the fence moved. That is no take-over: the commit stands and
    nothing counts an expiry (under a 10,000-session burst this failed turns after commit)."""
    metrics = Metrics()
    slow = FinishHeldOpen(store)
    leases = SessionLeases(slow, "a", TTL, metrics)  # type: ignore[arg-type]
    claimed = (await store.intake(intake(leases.new_owner()))).claimed
    assert claimed is not None
    lease = leases.turn(claimed)
    lease.start()
    commit = asyncio.create_task(lease.commit(Batch().set(keys.session(S1), "h"), "h"))
    await asyncio.wait_for(slow.finished.wait(), 5)
    snapshot = [lease.held()]
    assert await store.renew_sessions(snapshot, TTL) == [False]  # released: nothing to renew
    leases._lost(snapshot)  # what the renewal thread reports on the loop
    slow.go.set()
    await asyncio.wait_for(commit, 5)
    assert not lease.stale and lease.result is not None and lease.result.status == "released"
    assert metrics.total("session_leases_expired_total") == 0
    assert await store.get(keys.session(S1)) == "h"
