"""The session queue on its own (gateway/sessions/queue.py, stored.py), on a real redis-server
and the embedded store, with a runner that holds each turn open until let go and then
commits it as TurnRunner does (no model, no platform): a message with room starts with its
store step, later ones wait and run after it in order, each once; a message not queued after
all gives back its slot and lease; /stop drops what waits; a shutdown hands the running
turn's message to another process; a run whose lease lapsed is taken over and fenced off."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
import pytest_asyncio

from adapters.console import ConsoleAdapter
from gateway.config import RouterSettings
from gateway.intake.admission import Admission, Intake, Notifier, Status, Submission
from gateway.intake.group_context import GroupContext
from gateway.runtime.metrics import Metrics
from gateway.sdk.messages import Outbound, SentRef
from gateway.sdk.outcome import TurnOutcome
from gateway.sessions.key import SessionKey
from gateway.sessions.leases import SessionLeases
from gateway.sessions.queue import QUEUED_NOTICE, SessionQueue
from gateway.store import keys
from gateway.store.base import Batch, Store
from gateway.turn.runner import TurnJob
from gateway.turn.states import TurnRun
from tests.harness import eventually

KEY = SessionKey.parse("console:chat1")


class GatedRunner:
    """Runs each turn by waiting for `gate`, then committing it; a stopped turn commits what
    it has before the cancellation goes on, and one handed over at shutdown commits nothing,
    as TurnRunner does."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.started: list[str] = []
        self.committed: list[str] = []

    async def run(
        self,
        job: TurnJob,
        lease: TurnRun,
        *,
        context_lines: Sequence[str] = (),
        on_answering: Any = None,
        on_gathered: Any = None,
    ) -> TurnOutcome:
        self.started.append(job.turn_id)
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            if not lease.handing_over:
                await asyncio.shield(lease.commit(Batch(), lease.record))
                self.committed.append(job.turn_id)
            raise
        await lease.commit(Batch().set(keys.session(KEY), job.turn_id), job.turn_id)
        self.committed.append(job.turn_id)
        return TurnOutcome(reply=f"answer to {job.inbound.text}")


class Chat:
    """What the queue says in the chat (the queued notice)."""

    def __init__(self) -> None:
        self.said: list[str] = []

    async def send(self, out: Outbound) -> SentRef:
        self.said.append(out.text)
        return SentRef(chat=out.chat, message_id=str(len(self.said)))


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis), "embedded"])
def store(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


@dataclasses.dataclass
class Queued:
    queue: SessionQueue
    runner: GatedRunner
    chat: Chat
    leases: SessionLeases
    metrics: Metrics


def make_queue(store: Store, instance: str = "a", *, turns: int = 64, ttl: float = 30.0) -> Queued:
    """A queue with room to spare: a claim in flight holds up to 32 slots (CLAIM_BATCH), and
    intake starts a turn only on a slot free at that moment."""
    metrics, runner, chat = Metrics(), GatedRunner(), Chat()
    leases = SessionLeases(store, instance, ttl, metrics)
    queue = SessionQueue(
        store=store,
        runner=runner,  # type: ignore[arg-type]
        leases=leases,
        context=GroupContext(store, size=5),
        notifier=Notifier(chat.send),
        settings=RouterSettings(max_concurrent_turns=turns, merge_window_ms=0),
        metrics=metrics,
        instance_id=instance,
        turn_timeout=60,
    )
    return Queued(queue, runner, chat, leases, metrics)


@pytest_asyncio.fixture
async def here(store: Store) -> AsyncIterator[Queued]:
    made = make_queue(store)
    await made.queue.start()
    yield made
    await made.queue.stop()


CONSOLE = ConsoleAdapter("chat1", "alice", echo=False)


async def submit(queue: SessionQueue, text: str, turn_id: str) -> Submission:
    """What IntakeRoundTrip does with a message: store it, then enqueue it."""
    admission = Admission(CONSOLE.inbound(text), KEY, turn_id)
    async with queue.intake(admission, seen=None) as ticket:
        stored = dataclasses.replace(admission, intake=Intake(stored=ticket.stored))
        submission = await queue.enqueue(stored)
        ticket.queued = submission.status in (Status.STARTED, Status.QUEUED)
        return submission


async def test_a_message_with_room_starts_with_its_store_step(store: Store, here: Queued) -> None:
    submission = await submit(here.queue, "hi", "t1")
    assert submission.status is Status.STARTED
    await eventually(lambda: here.runner.started == ["t1"], 5, "the turn started")
    assert await store.lease_owner(keys.session_lease(KEY)) is not None
    assert here.queue.is_running(KEY)
    here.runner.gate.set()
    outcome = await asyncio.wait_for(submission.done, 5)
    assert outcome.reply == "answer to hi"
    await eventually(lambda: here.queue.sessions_here == 0, 5, "the worker ended")
    assert here.runner.committed == ["t1"]
    assert await store.pending(str(KEY)) == []
    assert await store.lease_owner(keys.session_lease(KEY)) is None
    assert await store.get(keys.session(KEY)) == "t1"


async def test_later_messages_wait_and_run_after_in_order_each_once(
    store: Store, here: Queued
) -> None:
    first = await submit(here.queue, "one", "t1")
    await eventually(lambda: here.runner.started == ["t1"], 5, "the first turn started")
    second = await submit(here.queue, "two", "t2")
    third = await submit(here.queue, "three", "t3")
    assert (first.status, second.status, third.status) == (
        Status.STARTED,
        Status.QUEUED,
        Status.QUEUED,
    )
    assert here.chat.said == [QUEUED_NOTICE]  # told once, for the first one that waits
    here.runner.gate.set()
    outcomes = await asyncio.wait_for(asyncio.gather(first.done, second.done, third.done), 10)
    assert [o.reply for o in outcomes] == ["answer to one", "answer to two", "answer to three"]
    # One worker ran them one after the other: each commit handed the lease to the next.
    assert here.runner.started == here.runner.committed == ["t1", "t2", "t3"]
    assert await store.pending(str(KEY)) == []


async def test_a_message_not_queued_after_all_gives_back_its_slot_and_lease(
    store: Store,
) -> None:
    made = make_queue(store, turns=1)  # one slot; leases of 30 s that nothing renews here
    admission = Admission(CONSOLE.inbound("hi"), KEY, "t1")
    # Not started yet: no claimer takes the one slot meanwhile.
    async with made.queue.intake(admission, seen=None) as ticket:
        assert ticket.owner is not None and ticket.claimed is not None
        assert await store.lease_owner(keys.session_lease(KEY)) == ticket.owner
    # Left without enqueue: the lease is released with the message left pending...
    assert await store.lease_owner(keys.session_lease(KEY)) is None
    assert [entry.id for entry in await store.pending(str(KEY))] == ["t1"]
    await made.queue.start()
    try:
        # ...and the slot is free: the claimer takes the message on it.
        await eventually(lambda: made.runner.started == ["t1"], 5, "the claimer ran it")
        made.runner.gate.set()
        await eventually(lambda: made.runner.committed == ["t1"], 5, "committed")
    finally:
        await made.queue.stop()


async def test_stop_drops_what_waits_and_the_stopped_turn_saves(store: Store, here: Queued) -> None:
    first = await submit(here.queue, "one", "t1")
    await eventually(lambda: here.runner.started == ["t1"], 5, "the first turn started")
    waiting = [await submit(here.queue, text, f"t{n}") for n, text in ((2, "two"), (3, "x"))]
    stopped = await here.queue.stop_session(KEY)
    assert stopped.running_here and stopped.dropped == 2
    for submission in (first, *waiting):
        assert (await asyncio.wait_for(submission.done, 5)).cancelled
    await eventually(lambda: here.queue.sessions_here == 0, 5, "the worker ended")
    assert here.runner.committed == ["t1"]
    assert await store.pending(str(KEY)) == []  # nothing left for any run
    assert await store.lease_owner(keys.session_lease(KEY)) is None


async def test_a_shutdown_hands_the_running_turn_to_another_process(store: Store) -> None:
    a, b = make_queue(store, "a"), make_queue(store, "b")
    await a.queue.start()
    try:
        assert (await submit(a.queue, "hi", "t1")).status is Status.STARTED
        await eventually(lambda: a.runner.started == ["t1"], 5, "a runs it")
    finally:
        await a.queue.stop()
    assert a.runner.committed == []
    assert [entry.id for entry in await store.pending(str(KEY))] == ["t1"]
    assert await store.lease_owner(keys.session_lease(KEY)) is None  # released, not lapsing
    b.runner.gate.set()
    await b.queue.start()
    try:
        await eventually(lambda: b.runner.committed == ["t1"], 5, "b ran it")
    finally:
        await b.queue.stop()
    assert await store.pending(str(KEY)) == []


async def test_a_run_whose_lease_lapsed_is_taken_over_and_stops_before_its_commit(
    store: Store,
) -> None:
    made = make_queue(store, ttl=1.0)
    await made.queue.start()
    try:
        submission = await submit(made.queue, "hi", "t1")
        await eventually(lambda: made.runner.started == ["t1"], 5, "the first run started")
        with made.leases.renewals_paused():  # as a stuck process: its lease lapses
            # The claimer here takes the session over with a new token.
            await eventually(lambda: made.runner.started == ["t1", "t1"], 10, "taken over")
        made.runner.gate.set()  # both runs go on to commit; only the second may
        outcome = await asyncio.wait_for(submission.done, 5)
        assert outcome.reply == "answer to hi"
        await eventually(lambda: made.queue.sessions_here == 0, 5, "the workers ended")
        assert made.runner.committed == ["t1"]  # once: the stale run stopped before it
        assert made.metrics.total("turns_stale_stopped_total") == 1
        assert made.metrics.total("sessions_recovered_total") == 1
        assert await store.pending(str(KEY)) == []
    finally:
        await made.queue.stop()
