"""The session inbox contract (gateway/store/inbox.py) on Redis (a real server and fakeredis)
and the embedded store: the same calls give the same results on every backend."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import fakeredis
import pytest
import pytest_asyncio

from gateway.runtime.metrics import Metrics
from gateway.sessions.leases import SessionLeases
from gateway.store import keys
from gateway.store.base import Batch, Store
from gateway.store.embedded import EmbeddedStore
from gateway.store.inbox import Claimed, FinishResult, HeldLease, InboxEntry, IntakeRequest
from gateway.store.redis import RedisStore
from gateway.store.redis_client import Command, Wire
from gateway.store.redis_inbox_scripts import CLAIM
from gateway.store.search import SearchDoc, query_terms
from tests.fakeredis_wire import store_over

S1, S2 = "telegram:1", "telegram:2"


@pytest_asyncio.fixture
async def fakeredis_store() -> AsyncIterator[RedisStore]:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer(), decode_responses=True)
    store = store_over(client, key_prefix="inbox")
    yield store
    await store.close()
    await client.aclose()


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("sentinel", marks=pytest.mark.redis),
        pytest.param("cluster", marks=pytest.mark.redis),
        "fakeredis",
        "embedded",
    ]
)
def store(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


def req(
    session: str = S1,
    n: int = 1,
    *,
    owner: str | None = None,
    seen: bool = True,
    max_queued: int = 10,
    max_total: int = 100,
    rate_limit: int = 0,
    lease_ttl: float = 5.0,
) -> IntakeRequest:
    return IntakeRequest(
        session=session,
        entry=InboxEntry(f"{session}-e{n}", f'{{"text": "message {n}"}}'),
        seen=keys.seen("test", f"{session}-{n}") if seen else None,
        seen_ttl=60,
        max_queued=max_queued,
        max_total=max_total,
        rate_key=keys.rate("test:u", 1) if rate_limit else None,
        rate_limit=rate_limit,
        lease_owner=owner,
        lease_ttl=lease_ttl,
    )


def held(claimed: Claimed) -> HeldLease:
    return HeldLease(claimed.session, claimed.owner, claimed.token)


def history(text: str, session: str = S1) -> Batch:
    return Batch().set(keys.session(session), text)


async def finish_run(
    store: Store,
    run: Claimed,
    record: str,
    *,
    owner: str = "a:1",
    keep: bool = True,
    lease_ttl: float = 5,
) -> FinishResult:
    """End `run`'s turn in S1 under its token, saving `record` as the history."""
    return await store.finish(
        S1,
        run.entry.id,
        owner,
        history(record),
        keep=keep,
        lease_ttl=lease_ttl,
        record=record,
        token=run.token,
    )


async def test_intake_takes_a_free_lease_and_returns_the_turn(store: Store) -> None:
    await store.set(keys.session(S1), "history-1")
    result = await store.intake(req(owner="a:1"))
    assert result.status == "stored" and result.queued == 1
    assert result.claimed is not None
    assert result.claimed.entry == InboxEntry(f"{S1}-e1", '{"text": "message 1"}')
    assert (result.claimed.record, result.claimed.attempt, result.claimed.reply) == (
        "history-1",
        1,
        None,
    )
    assert await store.lease_owner(keys.session_lease(S1)) == "a:1"
    # The same event again (a new entry under the same dedupe key) is a duplicate.
    again = dataclasses.replace(req(owner="a:2"), entry=InboxEntry(f"{S1}-e9", "{}"))
    assert (await store.intake(again)).status == "duplicate"


@pytest.mark.parametrize("seen", [True, False])
async def test_a_request_sent_again_gets_its_first_answer_and_stores_nothing_twice(
    store: Store, seen: bool
) -> None:
    """Its first answer lost with a failed-over master, the intake goes again to the new one,
    which has the entry already: the turn it took the lease for is handed back as it was."""
    first = await store.intake(req(owner="a:1", seen=seen))
    resent = await store.intake(req(owner="a:1", seen=seen))
    assert resent.status == "stored" and resent.queued == 1
    assert first.claimed is not None and resent.claimed is not None
    assert (resent.claimed.entry, resent.claimed.token, resent.claimed.attempt) == (
        first.claimed.entry,
        first.claimed.token,
        1,
    )
    assert len(await store.pending(S1)) == 1
    # Stored without taking a lease, or queued behind another holder: stored, once.
    queued = await store.intake(req(n=2, seen=seen))
    queued_again = await store.intake(req(n=2, seen=seen))
    assert (queued_again.status, queued_again.queued, queued_again.holder) == (
        "stored",
        2,
        "a:1",
    )
    assert queued.status == "stored" and queued_again.claimed is None
    assert [entry.id for entry in await store.pending(S1)] == [f"{S1}-e1", f"{S1}-e2"]


async def test_queued_behind_a_holder_with_one_notice_per_running_turn(store: Store) -> None:
    assert (await store.intake(req(n=1, owner="a:1"))).claimed is not None
    second = await store.intake(req(n=2, owner="b:1"))
    assert second.claimed is None and second.holder == "a:1" and second.notice
    third = await store.intake(req(n=3, owner="b:1"))
    assert third.holder == "a:1" and not third.notice and third.queued == 3
    assert [e.id for e in await store.pending(S1)] == [f"{S1}-e{n}" for n in (1, 2, 3)]


async def test_finish_hands_the_next_entry_over_under_the_same_lease(store: Store) -> None:
    await store.intake(req(n=1, owner="a:1"))
    await store.intake(req(n=2))
    done = await store.finish(
        S1, f"{S1}-e1", "a:1", history("h1"), keep=True, lease_ttl=5, record="h1"
    )
    assert done.status == "next" and done.next is not None
    assert done.next.entry.id == f"{S1}-e2" and done.next.record == "h1"
    assert await store.get(keys.session(S1)) == "h1"
    last = await store.finish(S1, f"{S1}-e2", "a:1", history("h2"), keep=True, lease_ttl=5)
    assert last.status == "released" and last.next is None
    assert await store.lease_owner(keys.session_lease(S1)) is None
    assert await store.pending(S1) == [] and await store.claim("c:1", 5) == []


async def test_a_lost_lease_writes_nothing(store: Store) -> None:
    await store.intake(req(owner="a:1", lease_ttl=0.2))
    await asyncio.sleep(0.3)
    (taken,) = await store.claim("b:1", 5)
    assert taken.attempt == 2  # it ran before: a re-run
    lost = await store.finish(S1, f"{S1}-e1", "a:1", history("late"), keep=True, lease_ttl=5)
    assert lost.status == "lost"
    assert await store.get(keys.session(S1)) is None
    assert [e.id for e in await store.pending(S1)] == [f"{S1}-e1"]


async def test_claim_takes_the_oldest_free_session_and_reports_a_sent_reply(store: Store) -> None:
    await store.intake(req(S1, 1))  # nobody took a lease: no room for a turn
    await asyncio.sleep(0.01)
    await store.intake(req(S2, 1))
    await store.record_reply(S1, f"{S1}-e1", '{"message_id": "9"}', 60)
    (first,) = await store.claim("w:1", 5)
    assert first.session == S1 and first.attempt == 1
    assert first.reply == '{"message_id": "9"}'
    (second,) = await store.claim("w:2", 5)
    assert second.session == S2
    assert await store.claim("w:3", 5) == []  # both are held


async def test_limits_refuse_before_storing(store: Store) -> None:
    for n in range(2):
        assert (await store.intake(req(n=n, max_queued=2))).status == "stored"
    full = await store.intake(req(n=2, max_queued=2))
    assert full.status == "queue_full" and full.queued == 2
    assert (await store.intake(req(S2, 1, max_total=2))).status == "overloaded"
    rated = [await store.intake(req(S2, n, rate_limit=2)) for n in range(10, 13)]
    assert [r.status for r in rated] == ["stored", "stored", "rate_limited"]
    assert rated[2].rate_count == 3
    assert len(await store.pending(S1)) == 2


async def test_drop_pending_and_a_running_turn_still_finishes(store: Store) -> None:
    await store.intake(req(n=1, owner="a:1"))
    await store.intake(req(n=2))
    assert await store.drop_pending(S1) == 2
    assert await store.pending(S1) == []
    done = await store.finish(S1, f"{S1}-e1", "a:1", history("h"), keep=True, lease_ttl=5)
    assert done.status == "released"
    # The total stays right: a new message is accepted under a total limit of one.
    assert (await store.intake(req(S2, 1, max_total=1))).status == "stored"


async def test_finish_without_keeping_leaves_the_rest_for_anyone(store: Store) -> None:
    await store.intake(req(n=1, owner="a:1"))
    await store.intake(req(n=2))
    done = await store.finish(S1, f"{S1}-e1", "a:1", Batch(), keep=False, lease_ttl=5)
    assert done.status == "released"
    (again,) = await store.claim("b:1", 5)
    assert again.entry.id == f"{S1}-e2" and again.owner == "b:1"


async def test_a_busy_session_does_not_hide_the_ones_waiting_behind_it(store: Store) -> None:
    # Many sessions hold a lease; a claim still finds the one that waits.
    for n in range(5):
        assert (await store.intake(req(f"busy:{n}", owner=f"a:{n}"))).claimed is not None
    await store.intake(req("waiting:1"))
    (found,) = await store.claim("w:1", 5, scan=2)
    assert found.session == "waiting:1"


async def test_renewal_keeps_a_lease_and_a_lapsed_one_is_claimed_again(store: Store) -> None:
    a = (await store.intake(req(S1, owner="a:1", lease_ttl=0.3))).claimed
    b = (await store.intake(req(S2, owner="b:1", lease_ttl=0.3))).claimed
    assert a is not None and b is not None
    wrong = HeldLease(S2, "b:1", b.token + 1)  # a token that was never handed out
    assert await store.renew_sessions([held(a), wrong], 0.3) == [True, False]
    await asyncio.sleep(0.2)
    assert await store.renew_sessions([held(a)], 5) == [True]
    await asyncio.sleep(0.25)
    (claimed,) = await store.claim("c:1", 5)
    assert claimed.session == S2 and claimed.attempt == 2
    assert await store.claim("c:2", 5) == []  # S1 is still held


async def test_a_message_answered_another_way_is_removed(store: Store) -> None:
    await store.intake(req(n=1, owner="a:1"))
    await store.intake(req(n=2))
    await store.intake(req(n=3))
    assert await store.remove_pending(S1, f"{S1}-e2")
    assert not await store.remove_pending(S1, f"{S1}-e2")
    assert [e.id for e in await store.pending(S1)] == [f"{S1}-e1", f"{S1}-e3"]
    assert (await store.intake(req(S2, 1, max_total=3))).status == "stored"  # total is 2 + 1


async def test_stats_count_pending_and_the_oldest_wait(store: Store) -> None:
    assert await store.inbox_stats() == (0, 0.0)
    await store.intake(req(S1, 1))  # waits: nobody runs it
    await store.intake(req(S2, 1, owner="a:1"))  # running
    await asyncio.sleep(0.3)
    pending, waited = await store.inbox_stats()
    assert pending == 2 and 0.25 <= waited < 5


async def test_one_claim_takes_several_waiting_sessions_oldest_first(store: Store) -> None:
    for n in range(5):
        await store.intake(req(f"wait:{n}"))
        await asyncio.sleep(0.005)
    taken = await store.claim("w:1", 5, limit=3)
    assert [c.session for c in taken] == ["wait:0", "wait:1", "wait:2"]
    assert [c.session for c in await store.claim("w:2", 5, limit=10)] == ["wait:3", "wait:4"]


async def test_the_embedded_inbox_after_a_restart(tmp_path: Path) -> None:
    # The process that held the leases is gone: every pending session waits for a worker,
    # and a reply recorded before the crash is found.
    store = EmbeddedStore(tmp_path)
    await store.intake(req(S1, 1, owner="dead:1"))
    await store.intake(req(S1, 2))
    await store.intake(req(S2, 1))
    await store.set(keys.reply(f"{S1}-e1"), '{"message_id": "7"}')
    await store.close()
    again = EmbeddedStore(tmp_path)
    try:
        assert (await again.inbox_stats())[0] == 3
        assert await again.lease_owner(keys.session_lease(S1)) is None
        taken = {c.session: c for c in await again.claim("new:1", 5, limit=5)}
        assert set(taken) == {S1, S2}
        assert taken[S1].entry.id == f"{S1}-e1" and taken[S1].reply == '{"message_id": "7"}'
    finally:
        await again.close()


async def test_finish_stores_the_turns_search_document(store: Store) -> None:
    result = await store.intake(req(owner="a:1"))
    assert result.claimed is not None
    doc = SearchDoc.build(f"{S1}-e1", S1, S1, 1000.0, "answered and indexed")
    done = await store.finish(
        S1, f"{S1}-e1", "a:1", history("h"), keep=True, lease_ttl=5, index=doc
    )
    assert done.status == "released"
    found = await store.search.search(query_terms("indexed"), chat=S1)
    assert [d.id for d in found] == [f"{S1}-e1"]


@pytest.mark.redis
async def test_finish_with_its_search_document_after_the_server_lost_its_scripts(
    redis_store: RedisStore,
) -> None:
    """Finish sends the index and the FINISH script in one pipeline of plain EVALSHAs; after
    a Redis restart emptied the script cache, both still run once, in order."""
    result = await redis_store.intake(req(owner="a:1"))
    assert result.claimed is not None
    await redis_store.intake(req(n=2))
    await redis_store._r.call("SCRIPT", "FLUSH")
    doc = SearchDoc.build(f"{S1}-e1", S1, S1, 1000.0, "indexed after a restart")
    done = await redis_store.finish(
        S1, f"{S1}-e1", "a:1", history("h1"), keep=True, lease_ttl=5, index=doc
    )
    assert done.status == "next" and done.next is not None
    assert done.next.entry.id == f"{S1}-e2"
    assert [e.id for e in await redis_store.pending(S1)] == [f"{S1}-e2"]  # popped once
    assert await redis_store.get(keys.session(S1)) == "h1"
    found = await redis_store.search.search(query_terms("restart"), chat=S1)
    assert [d.id for d in found] == [f"{S1}-e1"]


async def test_a_committed_turn_is_not_counted_as_an_expired_lease(store: Store) -> None:
    metrics = Metrics()
    leases = SessionLeases(store, "a", 5.0, metrics)
    claimed = (await store.intake(req(owner="a:1"))).claimed
    assert claimed is not None
    lease = leases.turn(claimed)
    lease.start()
    await lease.commit(history("h1"), None)
    assert lease.result is not None and lease.result.status == "released"
    # A heartbeat between the commit and let_go finds nothing of ours to renew.
    assert not leases.holds(S1)
    await leases._beat()
    await leases.let_go(lease)
    assert metrics.total("session_leases_expired_total") == 0


async def test_a_run_whose_session_was_taken_over_is_fenced_off_every_effect(
    store: Store,
) -> None:
    first = (await store.intake(req(owner="a:1", lease_ttl=0.2))).claimed
    assert first is not None
    await asyncio.sleep(0.3)  # the holder is alive but its lease lapsed
    (second,) = await store.claim("b:1", 5)
    assert second.token > first.token
    # The stale run can claim no reply slot, write nothing, and commit nothing.
    assert (await store.claim_reply(S1, first.token, first.entry.id, "a", 60)).status == "stale"
    assert not await store.fenced_write(S1, first.token, Batch().set("approval:x", "a", ttl=60))
    assert await store.get("approval:x") is None
    # The new run claims the slot once; a second claim finds it taken, with its value.
    assert (await store.claim_reply(S1, second.token, second.entry.id, "b", 60)).status == (
        "claimed"
    )
    again = await store.claim_reply(S1, second.token, second.entry.id, "c", 60)
    assert (again.status, again.existing) == ("taken", "b")
    # The same claim sent again (its first reply lost with a failed-over master) is its own.
    resent = await store.claim_reply(S1, second.token, second.entry.id, "b", 60)
    assert resent.status == "claimed"
    assert await store.fenced_write(S1, second.token, Batch().hset("approvals:p", "x", "1"))
    assert await store.hget("approvals:p", "x") == "1"
    done = await store.finish(
        S1, second.entry.id, "b:1", history("h-b"), keep=True, lease_ttl=5, token=second.token
    )
    assert done.status == "released"
    # With the lease free again, the stale run's commit still writes nothing: not its history,
    # not its search document.
    doc = SearchDoc.build(first.entry.id, S1, S1, 1.0, "stale words")
    late = await store.finish(
        S1,
        first.entry.id,
        "a:1",
        history("h-a"),
        keep=True,
        lease_ttl=5,
        index=doc,
        token=first.token,
    )
    assert late.status == "lost"
    assert await store.get(keys.session(S1)) == "h-b"
    assert await store.search.search(query_terms("stale"), chat=S1) == []


async def test_a_claim_sent_again_after_a_take_over_is_still_its_own(store: Store) -> None:
    """A run claims its reply slot; the master fails over before the answer comes back, and
    meanwhile the session is taken over. The claim sent again to the new master finds its own
    value: it stays this run's to send, and the run that took over finds the slot taken.
    Answering "stale" there left the message with no reply at all."""
    first = (await store.intake(req(owner="a:1", lease_ttl=0.2))).claimed
    assert first is not None
    mine = json.dumps({"claimed_by": first.token})
    assert (await store.claim_reply(S1, first.token, first.entry.id, mine, 60)).status == (
        "claimed"
    )
    await asyncio.sleep(0.3)
    (second,) = await store.claim("b:1", 5)
    assert second.token > first.token
    resent = await store.claim_reply(S1, first.token, first.entry.id, mine, 60)
    assert resent.status == "claimed"
    theirs = await store.claim_reply(
        S1, second.token, second.entry.id, json.dumps({"claimed_by": second.token}), 60
    )
    assert (theirs.status, theirs.existing) == ("taken", mine)
    # Any other claim of the stale run is still refused.
    assert (await store.claim_reply(S1, first.token, first.entry.id, "other", 60)).status == (
        "stale"
    )


async def test_a_finish_sent_again_gets_its_first_answer(store: Store) -> None:
    """A turn commits; the master fails over before the answer comes back, and the client
    sends the finish again to the new master, which has its writes. It gets the answer the
    first run gave: the next entry under the kept lease, with the same token and attempt.
    Answered "lost", the run stopped, and the next message waited for the kept lease to lapse
    and counted a second attempt."""
    first = (await store.intake(req(n=1, owner="a:1"))).claimed
    await store.intake(req(n=2))
    await store.intake(req(n=3))
    assert first is not None
    done = await finish_run(store, first, "h1")
    again = await finish_run(store, first, "h1")
    assert done.status == again.status == "next"
    assert done.next is not None and again.next == done.next
    assert (again.next.entry.id, again.next.attempt) == (f"{S1}-e2", 1)
    assert [e.id for e in await store.pending(S1)] == [f"{S1}-e2", f"{S1}-e3"]
    assert await store.claim("b:1", 5) == []  # the lease is still this run's
    # The last entry: released, and released again.
    second = await finish_run(store, done.next, "h2")
    assert second.next is not None
    last = await finish_run(store, second.next, "h3")
    last_again = await finish_run(store, second.next, "h3")
    assert (last.status, last_again.status) == ("released", "released")
    assert await store.pending(S1) == [] and await store.get(keys.session(S1)) == "h3"
    # An earlier run's finish is still refused: its fence moved on by more than one.
    assert (await finish_run(store, first, "stale")).status == "lost"
    assert await store.get(keys.session(S1)) == "h3"


async def test_a_finish_sent_again_after_its_kept_lease_lapsed_takes_it_back(
    store: Store,
) -> None:
    """The failover outlasts the lease the first finish kept for the next entry. Nobody took
    the session meanwhile, so the finish sent again takes the lease back and gets the first
    answer, as a renewal would. Answered "released", the run stopped, and the next message
    waited to be claimed again and counted a second attempt for its first run."""
    first = (await store.intake(req(n=1, owner="a:1"))).claimed
    await store.intake(req(n=2))
    assert first is not None
    done = await finish_run(store, first, first.entry.id, lease_ttl=0.2)
    await asyncio.sleep(0.3)
    assert await store.lease_owner(keys.session_lease(S1)) is None
    again = await finish_run(store, first, first.entry.id)
    assert done.status == again.status == "next"
    assert done.next is not None and again.next == done.next
    assert (again.next.entry.id, again.next.attempt, again.next.token) == (
        f"{S1}-e2",
        1,
        first.token + 1,
    )
    assert await store.lease_owner(keys.session_lease(S1)) == "a:1"
    assert await store.claim("b:1", 5) == []
    # The run goes on with the next entry under its token.
    assert (await finish_run(store, again.next, again.next.entry.id)).status == "released"
    assert await store.pending(S1) == [] and await store.get(keys.session(S1)) == f"{S1}-e2"


async def test_a_release_sent_again_takes_no_lease_back(store: Store) -> None:
    """A finish that released the lease, sent again, is "released" again and takes nothing:
    whether it was let go with entries waiting, or with none and a message stored after
    (which no run has started)."""
    first = (await store.intake(req(n=1, owner="a:1"))).claimed
    await store.intake(req(n=2))
    assert first is not None
    done = await finish_run(store, first, "h1", keep=False)
    again = await finish_run(store, first, "h1", keep=False)
    assert (done.status, again.status) == ("released", "released")
    assert await store.lease_owner(keys.session_lease(S1)) is None
    (second,) = await store.claim("b:1", 5)
    assert (second.entry.id, second.attempt) == (f"{S1}-e2", 1)
    # Kept, with nothing left to run: released; then a message comes that nobody has run.
    last = await finish_run(store, second, "h2", owner="b:1")
    await store.intake(req(n=3))
    last_again = await finish_run(store, second, "h2", owner="b:1")
    assert (last.status, last_again.status) == ("released", "released")
    assert await store.lease_owner(keys.session_lease(S1)) is None
    (third,) = await store.claim("c:1", 5)
    assert (third.entry.id, third.attempt) == (f"{S1}-e3", 1)


async def test_a_finish_after_a_take_over_is_lost_though_its_fence_moved_by_one(
    store: Store,
) -> None:
    """The fence moved by one because another run took the lapsed lease (its entry is still
    waiting), or that run's lease lapsed in turn: neither is this finish sent again."""
    first = (await store.intake(req(owner="a:1", lease_ttl=0.2))).claimed
    assert first is not None
    await asyncio.sleep(0.3)
    (second,) = await store.claim("b:1", 0.2)
    assert second.token == first.token + 1
    for _ in range(2):  # held by the other run, then lapsed with nobody holding it
        late = await finish_run(store, first, "late")
        assert late.status == "lost"
        await asyncio.sleep(0.3)
    assert await store.get(keys.session(S1)) is None
    assert [e.id for e in await store.pending(S1)] == [f"{S1}-e1"]


class AnswerLost:
    """The store's wire, except that each run of the given scripts (by SHA1; all scripts
    when none are given) happens twice and its caller gets the second answer: the first
    answer was lost with a failed-over master and the client sent the command again, as
    redis_client.py does."""

    def __init__(self, wire: Wire, *shas: str) -> None:
        self._wire = wire
        self._shas = set(shas)

    def _sent_twice(self, command: Sequence[object]) -> bool:
        if len(command) < 2 or command[0] != "EVALSHA":
            return False
        return not self._shas or command[1] in self._shas

    async def call(self, *command: str | int | float | bytes) -> Any:
        if self._sent_twice(command):
            await self._wire.call(*command)
        return await self._wire.call(*command)

    async def many(self, commands: Sequence[Command]) -> list[Any]:
        if any(self._sent_twice(c) for c in commands):
            await self._wire.many(commands)
        return await self._wire.many(commands)

    async def close(self) -> None:
        await self._wire.close()


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("sentinel", marks=pytest.mark.redis),
        pytest.param("cluster", marks=pytest.mark.redis),
        "fakeredis",
    ]
)
def redis_store_any(request: pytest.FixtureRequest) -> RedisStore:
    fixture: RedisStore = request.getfixturevalue(f"{request.param}_store")
    return fixture


async def test_a_claim_sent_again_gets_the_sessions_it_took_counted_once(
    redis_store_any: RedisStore,
) -> None:
    """Each claim runs twice, as when its answer is lost in a failover and the client sends
    it again: the second run answers with the sessions the first took (one owner names one
    claim), their tokens and attempts unchanged. Answered with nothing, as the first run had
    leased them, they waited out their leases and counted a second attempt."""
    store = redis_store_any
    sessions = {S1, S2, "telegram:3"}
    for n, session in enumerate(sorted(sessions)):
        await store.intake(req(session, n))
    inbox = store._inbox
    inbox._wire = AnswerLost(inbox._wire, CLAIM.sha)
    taken = await store.claim("c:1", 5, limit=2)
    # Stored in one millisecond, any two may be the oldest (Cluster breaks ties by shard).
    held = {c.session for c in taken}
    assert len(held) == 2 and held < sessions
    assert [(c.attempt, c.owner) for c in taken] == [(1, "c:1"), (1, "c:1")]
    assert all(c.token > 0 for c in taken)
    (other,) = await store.claim("c:2", 5, limit=3)  # the two are held; the third is free
    assert (other.session, other.attempt) == ((sessions - held).pop(), 1)
    assert await store.claim("c:3", 5, limit=3) == []
    # Each turn commits under the token it was handed: the fences never moved past them.
    for turn in (*taken, other):
        done = await store.finish(
            turn.session,
            turn.entry.id,
            turn.owner,
            Batch(),
            keep=True,
            lease_ttl=5,
            token=turn.token,
        )
        assert done.status == "released"


async def test_an_intake_sent_again_counts_its_sender_once(redis_store_any: RedisStore) -> None:
    """Every script of the intake runs twice, as when its answer is lost in a failover: the
    person's rate counter still counts each message once (on Cluster it is counted in a step
    of its own, before the intake), and a refusal sent again is answered as a refusal, not
    as a duplicate; another delivery of the refused message is a duplicate."""
    store = redis_store_any
    inbox = store._inbox
    plain = inbox._wire
    inbox._wire = AnswerLost(plain)
    rated = [await store.intake(req(S2, n, rate_limit=2)) for n in range(10, 13)]
    assert [r.status for r in rated] == ["stored", "stored", "rate_limited"]
    assert rated[2].rate_count == 3  # the two before it counted once each
    full = [await store.intake(req(S1, n, max_queued=1)) for n in (1, 2)]
    assert [r.status for r in full] == ["stored", "queue_full"]
    inbox._wire = plain
    redelivered = dataclasses.replace(req(S1, 2, max_queued=1), entry=InboxEntry("other", "{}"))
    assert (await store.intake(redelivered)).status == "duplicate"


async def test_a_renewal_takes_back_a_lapsed_lease_nobody_took(store: Store) -> None:
    first = (await store.intake(req(owner="a:1", lease_ttl=0.2))).claimed
    assert first is not None
    await asyncio.sleep(0.3)
    assert await store.renew_sessions([held(first)], 5) == [True]
    assert await store.claim("b:1", 5) == []  # held again: nobody takes it over
    assert (await store.claim_reply(S1, first.token, first.entry.id, "a", 60)).status == ("claimed")


async def test_a_renewal_from_before_a_release_does_not_take_the_lease_back(
    store: Store,
) -> None:
    """The renewal thread renews from a snapshot of held leases: one taken just before the
    turn committed and let its lease go must not revive it, or the session's next message
    waits a whole lease TTL (seen as 5.8 s p99 in bench/telegram_throughput.py on Redis)."""
    first = (await store.intake(req(n=1, owner="a:1"))).claimed
    assert first is not None
    done = await store.finish(
        S1, first.entry.id, "a:1", history("h1"), keep=True, lease_ttl=5, token=first.token
    )
    assert done.status == "released"
    assert await store.renew_sessions([held(first)], 5) == [False]
    second = (await store.intake(req(n=2, owner="a:1"))).claimed
    assert second is not None  # the next message starts at once: no lease holds it back
    assert second.token > first.token


async def test_each_turn_handed_on_gets_a_token_of_its_own(store: Store) -> None:
    first = (await store.intake(req(n=1, owner="a:1"))).claimed
    await store.intake(req(n=2))
    assert first is not None
    done = await store.finish(
        S1, first.entry.id, "a:1", history("h1"), keep=True, lease_ttl=5, token=first.token
    )
    assert done.next is not None and done.next.token > first.token
    assert not await store.fenced_write(S1, first.token, Batch())
    assert await store.fenced_write(S1, done.next.token, Batch())


async def test_finish_drops_the_entries_its_turn_absorbed_in_the_same_step(store: Store) -> None:
    """A steered turn took messages 2 and 4 in while it ran: its commit drops them with its
    own, and hands over message 3, which it did not take in."""
    await store.intake(req(n=1, owner="a:1"))
    for n in (2, 3, 4):
        await store.intake(req(n=n))
    done = await store.finish(
        S1,
        f"{S1}-e1",
        "a:1",
        history("h1"),
        keep=True,
        lease_ttl=5,
        absorbed=(f"{S1}-e2", f"{S1}-e4"),
    )
    assert done.status == "next" and done.next is not None
    assert done.next.entry.id == f"{S1}-e3"
    assert [e.id for e in await store.pending(S1)] == [f"{S1}-e3"]
    assert (await store.inbox_stats())[0] == 1
    last = await store.finish(S1, f"{S1}-e3", "a:1", history("h3"), keep=True, lease_ttl=5)
    assert last.status == "released"


async def test_a_turn_that_absorbed_everything_releases_the_lease(store: Store) -> None:
    await store.intake(req(n=1, owner="a:1"))
    await store.intake(req(n=2))
    done = await store.finish(
        S1, f"{S1}-e1", "a:1", history("h1"), keep=True, lease_ttl=5, absorbed=(f"{S1}-e2",)
    )
    assert done.status == "released"
    assert await store.pending(S1) == [] and await store.claim("c:1", 5) == []
    assert (await store.inbox_stats())[0] == 0


async def test_a_lost_turn_drops_nothing_it_absorbed(store: Store) -> None:
    await store.intake(req(n=1, owner="a:1", lease_ttl=0.2))
    await store.intake(req(n=2))
    await asyncio.sleep(0.3)
    (taken,) = await store.claim("b:1", 5)
    lost = await store.finish(
        S1,
        f"{S1}-e1",
        "a:1",
        history("late"),
        keep=True,
        lease_ttl=5,
        absorbed=(f"{S1}-e2",),
        token=taken.token - 1,
    )
    assert lost.status == "lost"
    assert [e.id for e in await store.pending(S1)] == [f"{S1}-e1", f"{S1}-e2"]


def edited(session: str, n: int, message_id: str, text: str) -> IntakeRequest:
    payload = json.dumps({"text": text, "message_id": message_id})
    return dataclasses.replace(req(session, n), entry=InboxEntry(f"{session}-e{n}", payload))


async def test_an_edit_replaces_a_waiting_message_until_a_turn_uses_it(store: Store) -> None:
    await store.intake(edited(S1, 1, "m1", "first"))  # no lease taken: nothing runs
    await store.intake(edited(S1, 2, "m2", "second"))
    new = json.dumps({"text": "second, fixed", "message_id": "m2"})
    assert await store.replace_pending(S1, "m2", new)
    assert [e.payload for e in await store.pending(S1)][1] == new
    assert not await store.replace_pending(S1, "m9", new)  # not stored: nothing to replace
    # Its turn runs: the first message is in use and is not replaced any more.
    (taken,) = await store.claim("a:1", 5)
    assert taken.entry.id == f"{S1}-e1"
    assert not await store.replace_pending(S1, "m1", json.dumps({"message_id": "m1"}))
    # A running turn took the second in (its mark written under the lease, as steering
    # does): not replaced either.
    assert await store.fenced_write(
        S1, taken.token, Batch().set(keys.joined(f"{S1}-e2"), "1", ttl=60)
    )
    assert not await store.replace_pending(S1, "m2", json.dumps({"message_id": "m2"}))
    assert [e.payload for e in await store.pending(S1)][1] == new
