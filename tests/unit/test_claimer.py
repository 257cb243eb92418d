"""The session queue's claimer (gateway/sessions/claimer.py): its backlog flag, the claimer alone
against a real store (each waiting session claimed once, never more at once than its slots),
and inside a queue with a runner that only holds the turn open and commits it: messages
stored with no room for them are claimed as slots free, never more turns at once than the
cap, each exactly once; while the event loop lags, no turn starts with intake."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import pytest

from adapters.console import ConsoleAdapter
from gateway.config import RouterSettings
from gateway.intake.admission import Admission, Notifier
from gateway.intake.group_context import GroupContext
from gateway.intake.load import IntakeLoad
from gateway.runtime.loop_lag import LoopLag
from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_task
from gateway.sdk.messages import Outbound, SentRef
from gateway.sdk.outcome import TurnOutcome
from gateway.sessions.claimer import Backlog, Claimer
from gateway.sessions.key import SessionKey
from gateway.sessions.leases import SessionLeases
from gateway.sessions.pressure import TurnPressure
from gateway.sessions.queue import SessionQueue
from gateway.sessions.slots import Slots
from gateway.store.base import Batch, Store
from gateway.store.inbox import Claimed, InboxEntry, IntakeRequest
from gateway.turn.runner import TurnJob
from gateway.turn.states import TurnRun
from tests.harness import eventually


class HoldingRunner:
    """Runs a turn by waiting until released, then committing it (no model, no platform)."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.ran: list[str] = []
        self.release = asyncio.Event()

    async def run(
        self,
        job: TurnJob,
        lease: TurnRun,
        *,
        context_lines: Sequence[str] = (),
        on_answering: Any = None,
        on_gathered: Any = None,
    ) -> TurnOutcome:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await self.release.wait()
            await lease.commit(Batch(), lease.record)
            self.ran.append(job.turn_id)
            return TurnOutcome(reply="done")
        finally:
            self.running -= 1


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


async def nowhere(out: Outbound) -> SentRef:
    raise AssertionError(f"nothing is said in these chats: {out.text!r}")


async def test_waiting_sessions_are_claimed_up_to_the_cap_each_once(store: Store) -> None:
    metrics = Metrics()
    runner = HoldingRunner()
    leases = SessionLeases(store, "a", 5.0, metrics)
    queue = SessionQueue(
        store=store,
        runner=runner,  # type: ignore[arg-type]
        leases=leases,
        context=GroupContext(store, size=5),
        notifier=Notifier(nowhere),
        settings=RouterSettings(max_concurrent_turns=2),
        metrics=metrics,
        instance_id="a",
        turn_timeout=60,
    )
    console = ConsoleAdapter("chat0", "alice", echo=False)
    ids = []
    for n in range(5):  # stored with no lease taken: nobody had room for them
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
    await queue.start()
    try:
        await eventually(lambda: runner.running == 2, 10, "two turns running")
        runner.release.set()
        await eventually(lambda: len(runner.ran) == 5, 10, "every turn run")
        assert sorted(runner.ran) == sorted(ids)  # each exactly once
        assert runner.most == 2  # never more than the cap
        assert (await store.inbox_stats())[0] == 0
    finally:
        await queue.stop()


def block_the_loop(seconds: float) -> None:
    """A process whose event loop runs nothing for a while (a CPU burst, a blocking call)."""
    time.sleep(seconds)


async def test_no_turn_starts_with_intake_while_the_loop_lags(store: Store) -> None:
    metrics = Metrics()
    leases = SessionLeases(store, "a", 5.0, metrics, loop_lag=LoopLag(metrics, limit=0.3))
    runner = HoldingRunner()
    runner.release.set()  # the stored messages' turns just end
    queue = SessionQueue(
        store=store,
        runner=runner,  # type: ignore[arg-type]
        leases=leases,
        context=GroupContext(store, size=5),
        notifier=Notifier(nowhere),
        settings=RouterSettings(),
        metrics=metrics,
        instance_id="a",
        turn_timeout=60,
    )
    console = ConsoleAdapter("chat1", "alice", echo=False)
    key = SessionKey.parse("console:chat1")
    await queue.start()
    try:
        await eventually(lambda: not leases.loop_lag.lagging, 5)
        admission = Admission(console.inbound("first"), key, "t0")
        async with queue.intake(admission, seen=None) as ticket:
            # Room, and the loop keeps up: the lease is taken with the store step.
            assert ticket.owner is not None and ticket.stored.claimed is not None
        block_the_loop(1.0)
        admission = Admission(console.inbound("second"), key, "t1")
        async with queue.intake(admission, seen=None) as ticket:
            # Behind: the message is stored, its turn starts later (here or elsewhere).
            assert ticket.owner is None and ticket.stored.status == "stored"
            assert ticket.stored.claimed is None
    finally:
        await queue.stop()


def test_the_backlog_is_cleared_only_by_a_claim_that_saw_every_more() -> None:
    backlog = Backlog()
    assert backlog.known  # a new process claims at once what an earlier one left
    mark = backlog.mark()
    backlog.cleared(mark)  # a claim came back short: nothing more waited
    assert not backlog.known
    backlog.more()
    mark = backlog.mark()
    backlog.more()  # stored while that claim ran: it may not have seen it
    backlog.cleared(mark)
    assert backlog.known
    backlog.cleared(backlog.mark())
    assert not backlog.known


def stored_with_no_lease(n: int) -> IntakeRequest:
    return IntakeRequest(
        session=f"console:chat{n}",
        entry=InboxEntry(f"entry{n}", '{"text": "hi"}'),
        seen=None,
        seen_ttl=60,
        max_queued=10,
        max_total=100,
    )


async def test_the_claimer_alone_takes_each_waiting_session_once_within_its_slots(
    store: Store,
) -> None:
    metrics = Metrics()
    leases = SessionLeases(store, "a", 30.0, metrics)
    slots = Slots(2)
    claimed: list[Claimed] = []
    ended = 0
    most = 0  # turns claimed and not yet ended, at most

    def run(found: Claimed) -> None:
        """What the queue does with a claimed session: run it on the slot held for it."""
        nonlocal most
        claimed.append(found)
        most = max(most, len(claimed) - ended)

    pressure = TurnPressure(LoopLag(metrics, limit=10.0), IntakeLoad(), 1)
    claimer = Claimer(store, leases, slots, run, pressure)
    for n in range(5):
        assert (await store.intake(stored_with_no_lease(n))).claimed is None
    task = asyncio.create_task(claimer.run())
    try:
        for total in (2, 4, 5):

            def all_claimed(n: int = total) -> bool:
                return len(claimed) == n

            await eventually(all_claimed, 10, f"{total} claimed")
            for turn in claimed[ended:]:  # those turns end: their slots free up
                await store.finish(
                    turn.session,
                    turn.entry.id,
                    turn.owner,
                    Batch(),
                    keep=False,
                    lease_ttl=30.0,
                    token=turn.token,
                )
                ended += 1
                slots.give()
                claimer.slot_freed()
    finally:
        await stop_task(task)
    assert sorted(c.entry.id for c in claimed) == [f"entry{n}" for n in range(5)]
    assert len({c.session for c in claimed}) == 5  # each session once
    assert most == 2  # never more turns at once than slots
    assert await store.pending("console:chat0") == []
