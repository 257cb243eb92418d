"""The turn's state machine (gateway/turn/states.py) on its own, and as a TurnLease walks it
against a real store: every transition named, every other move refused."""

from __future__ import annotations

import pytest

from gateway.runtime.metrics import Metrics
from gateway.sessions.leases import SessionLeases
from gateway.store import keys
from gateway.store.base import Batch, Store
from gateway.store.inbox import InboxEntry, IntakeRequest
from gateway.turn.states import TRANSITIONS, IllegalTransition, TurnLife, TurnState

S1 = "telegram:1"


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
    assert lease.life.state is TurnState.CLAIMED
    lease.start()
    assert await lease.claim_reply() is None
    assert lease.life.state is TurnState.REPLIED
    # The slot is claimed in the store: a second claim finds it taken.
    assert (await store.claim_reply(S1, lease.token, "e1", "{}", 60)).status == "taken"
    await lease.commit(Batch().set(keys.session(S1), "h"), "h")
    assert lease.life.state is TurnState.COMMITTED
    assert await store.pending(S1) == []
    with pytest.raises(IllegalTransition):
        await lease.commit(Batch(), "h")  # a turn is committed once
