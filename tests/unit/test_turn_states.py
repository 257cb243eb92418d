"""The turn's state machine (gateway/turn/states.py) on its own, and as a TurnRun and an intake
ticket (gateway/sessions/stored.py) walk it against a real store: every transition named and
one store step, every other move refused."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from gateway.runtime.metrics import Metrics
from gateway.sessions.fencing import StaleTurn
from gateway.sessions.key import SessionKey
from gateway.sessions.leases import SessionLeases
from gateway.sessions.slots import Slots
from gateway.sessions.stored import IntakeTicket
from gateway.store import keys
from gateway.store.base import Batch, Store
from gateway.store.inbox import Claimed, FinishResult, InboxEntry, IntakeRequest, ReplyClaim
from gateway.turn.states import TRANSITIONS, IllegalTransition, TurnLife, TurnRun, TurnState

S1 = "telegram:1"


def state_of(life: TurnLife) -> TurnState:
    """The state read afresh: mypy would keep `life.state` narrowed across the moves."""
    return life.state


def test_the_happy_path_and_its_ends() -> None:
    life = TurnLife(TurnState.STORED)
    assert [life.move(t) for t in ("claim", "start", "reply", "commit")] == [
        TurnState.CLAIMED,
        TurnState.RUNNING,
        TurnState.REPLIED,
        TurnState.COMMITTED,
    ]
    assert life.ended
    for transition in TRANSITIONS:  # an ended run moves no more
        with pytest.raises(IllegalTransition):
            life.move(transition)


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        (("start",), "claim"),  # a run is claimed once
        ((), "reply"),  # nothing is sent before the run starts
        ((), "commit"),
        (("start", "dead_letter"), "reply"),
        (("release",), "start"),  # handed back: another run takes it
        (("start", "stale"), "commit"),  # taken over: nothing more
    ],
)
def test_moves_out_of_order_are_refused(path: tuple[str, ...], illegal: str) -> None:
    life = TurnLife()
    for transition in path:
        life.move(transition)
    assert not life.may(illegal)
    with pytest.raises(IllegalTransition):
        life.move(illegal)


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


async def test_a_lease_walks_the_machine_in_store_steps(store: Store) -> None:
    leases = SessionLeases(store, "a", 5.0, Metrics())
    request = IntakeRequest(
        session=S1,
        entry=InboxEntry("e1", '{"text": "hi"}'),
        seen=None,
        seen_ttl=60,
        max_queued=10,
        max_total=100,
        lease_owner=leases.new_owner(),
    )
    claimed = (await store.intake(request)).claimed
    assert claimed is not None
    lease = leases.turn(claimed)
    assert state_of(lease.life) is TurnState.CLAIMED
    lease.start()
    assert await lease.claim_reply() is None
    assert state_of(lease.life) is TurnState.REPLIED
    # The slot is claimed in the store: a second claim finds it taken.
    assert (await store.claim_reply(S1, lease.token, "e1", "{}", 60)).status == "taken"
    await lease.commit(Batch().set(keys.session(S1), "h"), "h")
    assert state_of(lease.life) is TurnState.COMMITTED
    assert await store.pending(S1) == []
    with pytest.raises(IllegalTransition):
        await lease.commit(Batch(), "h")  # a turn is committed once


def intake_request(owner: str | None) -> IntakeRequest:
    return IntakeRequest(
        session=S1,
        entry=InboxEntry("e1", '{"text": "hi"}'),
        seen=None,
        seen_ttl=60,
        max_queued=10,
        max_total=100,
        lease_owner=owner,
    )


async def run_with_a_short_lease(store: Store, leases: SessionLeases) -> TurnRun:
    request = dataclasses.replace(intake_request(leases.new_owner()), lease_ttl=0.2)
    claimed = (await store.intake(request)).claimed
    assert claimed is not None
    run = leases.turn(claimed)
    run.start()
    return run


async def take_over(store: Store) -> Claimed:
    await asyncio.sleep(0.3)  # the first run's lease lapsed (nothing renews it here)
    (taken,) = await store.claim("b:1", 5.0)
    return taken


async def test_a_run_found_stale_after_claiming_its_reply_slot_still_sends(
    store: Store,
) -> None:
    run = await run_with_a_short_lease(store, SessionLeases(store, "a", 5.0, Metrics()))
    assert await run.claim_reply() is None
    taken = await take_over(store)
    run.mark_stale()  # what the renewal does once it sees the fence moved on
    assert await run.claim_reply() is None  # the slot is its own: it sends
    other = await store.claim_reply(S1, taken.token, "e1", json.dumps({"claimed_by": 9}), 60)
    assert other.status == "taken"  # the run that took over sends nothing
    with pytest.raises(StaleTurn):  # and the stale run commits nothing
        await run.commit(Batch().set(keys.session(S1), "late"), "late")


async def test_a_reply_claim_that_comes_back_after_a_take_over_is_sent(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim reaches the store, its answer is lost with a failed-over master, the session
    is taken over meanwhile, and the claim sent again finds the slot holding its own value."""
    run = await run_with_a_short_lease(store, SessionLeases(store, "a", 5.0, Metrics()))
    claim = store.claim_reply
    taken: list[Claimed] = []

    async def lost_answer(
        session: str, token: int, entry_id: str, value: str, ttl: float
    ) -> ReplyClaim:
        await claim(session, token, entry_id, value, ttl)  # done; its answer never came
        taken.append(await take_over(store))
        run.mark_stale()
        return await claim(session, token, entry_id, value, ttl)  # sent again

    monkeypatch.setattr(store, "claim_reply", lost_answer)
    assert await run.claim_reply() is None
    assert run.state is TurnState.STALE
    monkeypatch.undo()
    other = await store.claim_reply(S1, taken[0].token, "e1", "{}", 60)
    assert other.status == "taken"


async def test_a_commit_sent_again_after_a_failover_hands_on_the_next_message(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit reaches the store, its answer is lost with a failed-over master, and the
    client sends it again: the run is committed and hands on the next message under the
    lease it kept, counted once, instead of stopping as if taken over."""
    leases = SessionLeases(store, "a", 5.0, Metrics())
    claimed = (await store.intake(intake_request(leases.new_owner()))).claimed
    second = dataclasses.replace(intake_request(None), entry=InboxEntry("e2", '{"text": "2"}'))
    await store.intake(second)
    assert claimed is not None
    run = leases.turn(claimed)
    run.start()
    finish = store.finish

    async def lost_answer(*args: Any, **kwargs: Any) -> FinishResult:
        await finish(*args, **kwargs)  # done; its answer never came
        return await finish(*args, **kwargs)  # sent again

    monkeypatch.setattr(store, "finish", lost_answer)
    await run.commit(Batch().set(keys.session(S1), "h1"), "h1")
    monkeypatch.undo()
    assert run.state is TurnState.COMMITTED
    assert run.result is not None and run.result.next is not None
    following = run.result.next
    assert (following.entry.id, following.attempt, following.record) == ("e2", 1, "h1")
    assert following.token == run.token + 1
    assert await store.claim("b:1", 5.0) == []  # the lease is still held for it
    assert [entry.id for entry in await store.pending(S1)] == ["e2"]


async def test_release_hands_the_message_back_in_one_store_step(store: Store) -> None:
    leases = SessionLeases(store, "a", 5.0, Metrics())
    claimed = (await store.intake(intake_request(leases.new_owner()))).claimed
    assert claimed is not None
    run = leases.turn(claimed)
    run.start()
    await run.release()
    assert run.state is TurnState.RELEASED
    assert await store.lease_owner(keys.session_lease(SessionKey.parse(S1))) is None
    (again,) = await store.claim("b:1", 5.0)  # the next run takes it at once, fenced anew
    assert again.entry.id == "e1" and again.token > run.token and again.attempt == 2
    with pytest.raises(StaleTurn):  # the released run may do nothing more
        await run.check("a late effect")


async def test_a_committed_run_is_not_released(store: Store) -> None:
    leases = SessionLeases(store, "a", 5.0, Metrics())
    claimed = (await store.intake(intake_request(leases.new_owner()))).claimed
    assert claimed is not None
    run = leases.turn(claimed)
    run.start()
    await run.commit(Batch(), None)
    await leases.let_go(run)  # what a worker does at its end, whatever happened
    assert run.state is TurnState.COMMITTED
    assert await store.pending(S1) == []


async def test_an_intake_ticket_is_the_stored_state_until_a_worker_takes_its_run(
    store: Store,
) -> None:
    leases, slots = SessionLeases(store, "a", 5.0, Metrics()), Slots(1)
    assert slots.take_now()  # reserved for the ticket
    ticket = IntakeTicket(leases.new_owner())
    assert state_of(ticket.life) is TurnState.STORED
    ticket.took(await store.intake(intake_request(ticket.owner)))
    assert state_of(ticket.life) is TurnState.CLAIMED and ticket.claimed is not None
    run = ticket.hand_over(leases)
    run.start()
    assert state_of(ticket.life) is TurnState.RUNNING and ticket.claimed is None
    assert not await ticket.settle(slots, leases)  # the worker keeps the slot and the lease
    assert slots.free == 0 and leases.holds(S1)


async def test_an_intake_ticket_nobody_started_gives_back_its_slot_and_lease(
    store: Store,
) -> None:
    leases, slots = SessionLeases(store, "a", 5.0, Metrics()), Slots(1)
    assert slots.take_now()
    ticket = IntakeTicket(leases.new_owner())
    ticket.took(await store.intake(intake_request(ticket.owner)))
    assert await ticket.settle(slots, leases)
    assert ticket.life.state is TurnState.RELEASED
    assert slots.free == 1 and not leases.holds(S1)
    assert [entry.id for entry in await store.pending(S1)] == ["e1"]
    assert await store.lease_owner(keys.session_lease(SessionKey.parse(S1))) is None
