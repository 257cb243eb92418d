"""Turns give way to intake (gateway/sessions/pressure.py): while intake is busy or the event
loop lags, intake starts no turn and the claimer keeps at most the pressure floor's turns
running, claiming nothing more until the pressure eases; then it takes the rest at once."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from adapters.console import ConsoleAdapter
from gateway.config import RouterSettings
from gateway.intake.admission import Admission, Notifier
from gateway.intake.group_context import GroupContext
from gateway.intake.load import BUSY_ABOVE, IntakeLoad
from gateway.runtime.loop_lag import LoopLag
from gateway.runtime.metrics import Metrics
from gateway.sessions.key import SessionKey
from gateway.sessions.leases import SessionLeases
from gateway.sessions.pressure import TurnPressure, pressure_floor
from gateway.sessions.queue import SessionQueue
from gateway.store.base import Store
from gateway.store.inbox import InboxEntry, IntakeRequest
from tests.harness import eventually
from tests.unit.test_claimer import HoldingRunner, block_the_loop, nowhere

MAX_TURNS = 16  # a pressure floor of one turn


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis), "embedded"])
def store(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


def test_the_floor_is_a_share_of_the_turns_and_at_least_one() -> None:
    assert pressure_floor(512) == 32
    assert pressure_floor(MAX_TURNS) == 1
    assert pressure_floor(3) == 1


def test_room_is_whatever_is_wanted_without_pressure_and_the_floor_with_it() -> None:
    load = IntakeLoad(busy_above=2)
    pressure = TurnPressure(LoopLag(Metrics(), limit=1.0), load, floor=4)
    assert not pressure.on and pressure.room(running=10, wanted=32) == 32
    with contextlib.ExitStack() as inside:
        for _ in range(3):
            inside.enter_context(load.entered())
        assert load.busy and pressure.on
        assert pressure.room(running=1, wanted=32) == 3
        assert pressure.room(running=4, wanted=32) == 0
        assert pressure.room(running=9, wanted=1) == 0
    assert not pressure.on


def test_intake_tells_its_listeners_when_it_goes_busy_and_quiet() -> None:
    load = IntakeLoad(busy_above=1)
    told: list[tuple[str, int]] = []
    load.when_busy(lambda: told.append(("busy", load.in_flight)))
    load.when_quiet(lambda: told.append(("quiet", load.in_flight)))
    with load.entered(), load.entered():
        assert load.busy and told == [("busy", 2)]
        with load.entered():
            assert told == [("busy", 2)]  # once per crowd, not per call
    assert told == [("busy", 2), ("quiet", 1)] and not load.busy


async def store_waiting(store: Store, count: int) -> list[str]:
    """`count` messages in sessions of their own, stored with no lease taken."""
    console = ConsoleAdapter("chat0", "alice", echo=False)
    ids = []
    for n in range(count):
        inbound = console.inbound(f"message {n}", chat_id=f"chat{n}")
        ids.append(f"entry{n}")
        result = await store.intake(
            IntakeRequest(
                session=f"console:chat{n}",
                entry=InboxEntry(ids[-1], inbound.model_dump_json()),
                seen=None,
                seen_ttl=60,
                max_queued=10,
                max_total=100,
            )
        )
        assert result.status == "stored" and result.claimed is None
    return ids


@contextlib.asynccontextmanager
async def queue_of(
    store: Store, runner: HoldingRunner, leases: SessionLeases, load: IntakeLoad
) -> AsyncIterator[SessionQueue]:
    metrics = Metrics()
    queue = SessionQueue(
        store=store,
        runner=runner,  # type: ignore[arg-type]
        leases=leases,
        context=GroupContext(store, size=5),
        notifier=Notifier(nowhere),
        settings=RouterSettings(max_concurrent_turns=MAX_TURNS),
        metrics=metrics,
        instance_id="a",
        turn_timeout=60,
        intake_load=load,
    )
    await queue.start()
    try:
        yield queue
    finally:
        runner.release.set()
        await queue.stop()


async def test_while_intake_is_busy_turns_wait_beyond_the_floor(store: Store) -> None:
    load = IntakeLoad()
    runner = HoldingRunner()
    ids = await store_waiting(store, 4)
    leases = SessionLeases(store, "a", 5.0, Metrics())
    with contextlib.ExitStack() as crowd:
        for _ in range(BUSY_ABOVE + 1):  # a crowd inside admission
            crowd.enter_context(load.entered())
        async with queue_of(store, runner, leases, load) as queue:
            await eventually(lambda: runner.running == 1, 10, "the floor's one turn")
            # Intake stores a new message but starts no turn of its own while busy.
            console = ConsoleAdapter("chat9", "alice", echo=False)
            admission = Admission(console.inbound("new"), SessionKey.parse("console:chat9"), "t9")
            async with queue.intake(admission, seen=None) as ticket:
                assert ticket.owner is None and ticket.stored.claimed is None
            await asyncio.sleep(1.5)  # longer than a claim poll: still only the floor
            assert runner.running == 1 and runner.most == 1
            crowd.close()  # intake goes quiet: the rest is claimed
            await eventually(lambda: runner.running == 5, 10, "every waiting turn running")
            runner.release.set()
            await eventually(lambda: len(runner.ran) == 5, 10, "every turn run")
    assert sorted(runner.ran) == sorted([*ids, "t9"])  # each exactly once


async def lag_the_loop(seconds: float) -> None:
    """Keep the event loop `seconds` behind (a CPU-bound process) while letting it run."""
    while True:
        block_the_loop(seconds)
        await asyncio.sleep(0)


async def test_while_the_loop_lags_the_claimer_claims_nothing_beyond_the_floor(
    store: Store,
) -> None:
    metrics = Metrics()
    runner = HoldingRunner()
    lag = LoopLag(metrics, limit=0.3)
    leases = SessionLeases(store, "a", 5.0, metrics, loop_lag=lag)
    async with queue_of(store, runner, leases, IntakeLoad()):
        lagging = asyncio.create_task(lag_the_loop(0.5))
        try:
            await eventually(lambda: lag.lagging, 10, "the loop lagging")
            ids = await store_waiting(store, 4)  # found by the claimer's poll
            await eventually(lambda: runner.running == 1, 10, "the floor's one turn")
            for _ in range(8):  # several claim polls while it lags: nothing more claimed
                await asyncio.sleep(0.3)
                assert runner.running == 1
        finally:
            lagging.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lagging
        await eventually(lambda: runner.running == 4, 10, "the rest claimed once caught up")
        runner.release.set()
        await eventually(lambda: len(runner.ran) == 4, 10, "every turn run")
    assert sorted(runner.ran) == sorted(ids)
    assert runner.most == 4
