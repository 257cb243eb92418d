"""Leader election (gateway/runtime/leader.py) on its own, on a real redis-server and the embedded
store: one leader at a time, a quick handover when it stops, and a leader that fails to
start steps down and lets another try."""

from __future__ import annotations

import asyncio

import pytest

from gateway.runtime.leader import LeaderElection
from gateway.store import keys
from gateway.store.base import Store
from tests.harness import eventually

TTL = 0.6


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis), "embedded"])
def store(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


class Runner:
    """What a leader runs (the poller, say): counts its starts and stops."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.elected = 0
        self.deposed = 0

    async def on_elected(self) -> None:
        self.elected += 1
        if self.fail:
            raise RuntimeError("cannot start")

    async def on_deposed(self) -> None:
        self.deposed += 1


def election(store: Store, owner: str, runner: Runner) -> LeaderElection:
    return LeaderElection(
        store,
        "job",
        owner,
        ttl=TTL,
        on_elected=runner.on_elected,
        on_deposed=runner.on_deposed,
    )


async def test_one_leader_and_a_quick_handover(store: Store) -> None:
    a_runner, b_runner = Runner(), Runner()
    a, b = election(store, "a", a_runner), election(store, "b", b_runner)
    a.start()
    await eventually(lambda: a.is_leader, 5, "a elected")
    b.start()
    try:
        await asyncio.sleep(3 * TTL)  # b tries several times while a renews
        assert a.is_leader and not b.is_leader and b_runner.elected == 0
        assert await store.lease_owner(keys.leader("job")) == "a"
        await a.stop()  # releases at once
        await eventually(lambda: b.is_leader, 5 * TTL, "b takes over")
        assert (a_runner.elected, a_runner.deposed) == (1, 1)
        assert b_runner.elected == 1
    finally:
        await a.stop()
        await b.stop()
    assert await store.lease_owner(keys.leader("job")) is None


async def test_a_leader_that_cannot_start_steps_down_for_another(store: Store) -> None:
    broken, working = Runner(fail=True), Runner()
    a = election(store, "a", broken)
    a.start()
    await eventually(lambda: broken.elected >= 1, 5, "a tried")
    b = election(store, "b", working)
    b.start()
    try:
        await eventually(lambda: b.is_leader, 10, "b elected")
        assert broken.deposed >= 1 and not a.is_leader
    finally:
        await a.stop()
        await b.stop()
