"""The session inbox on the embedded store, with the same results as the Redis scripts
(gateway/store/redis_inbox.py); tests/unit/test_inbox_contract.py runs both.

The embedded store serves one process (it holds a lock on its directory), so only what must
survive that process lives in SQLite: the pending messages, the dedupe keys, the history and
the reply records. Who runs which session (leases and their fences), which sessions wait,
attempt counts and the pending total are runtime state kept in memory: after a restart no
lease is held and every session with pending messages waits, which is exactly right for a
process that died (and none of its runs is left to fence off).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gateway.store import keys
from gateway.store.base import Batch
from gateway.store.inbox import (
    Claimed,
    FinishResult,
    HeldLease,
    InboxEntry,
    IntakeRequest,
    IntakeResult,
    ReplyClaim,
)
from gateway.store.search import SearchDoc

if TYPE_CHECKING:
    from gateway.store.embedded import EmbeddedStore

NOTICE_TTL = 3600.0


@dataclass
class InboxState:
    """The inbox's runtime state for the one process using the embedded store."""

    ready: dict[str, float] = field(default_factory=dict)  # session -> when a worker may take it
    leases: dict[str, tuple[str, float]] = field(default_factory=dict)  # session -> owner, until
    started: dict[str, int] = field(default_factory=dict)  # entry id -> attempts
    fences: dict[str, int] = field(default_factory=dict)  # session -> its fencing token
    total: int = 0
    # The lease renewal thread renews leases while the loop runs: what both touch (leases,
    # fences) changes under this lock.
    lock: threading.RLock = field(default_factory=threading.RLock)

    def holder(self, session: str, now: float) -> str | None:
        with self.lock:
            lease = self.leases.get(session)
            if lease is None or lease[1] <= now:
                self.leases.pop(session, None)
                return None
            return lease[0]

    def take(self, session: str, owner: str, ttl: float, now: float) -> None:
        with self.lock:
            self.leases[session] = (owner, now + ttl)
            self.ready[session] = now + ttl

    def grant(self, session: str, owner: str, ttl: float, now: float) -> int:
        """Take the lease for a new run: its fence moves on; returns the run's token."""
        with self.lock:
            self.take(session, owner, ttl, now)
            self.fences[session] = self.fences.get(session, 0) + 1
            return self.fences[session]

    def release(self, session: str) -> None:
        """Let the lease go and move the fence on: a renewal from before the release (the
        renewal thread's snapshot) must not take a lease back that its run gave up."""
        with self.lock:
            self.leases.pop(session, None)
            if session in self.fences:
                self.fences[session] += 1

    def fenced(self, session: str, token: int) -> bool:
        return self.fences.get(session, 0) == token

    def attempt(self, entry_id: str) -> int:
        self.started[entry_id] = self.started.get(entry_id, 0) + 1
        return self.started[entry_id]


async def count_attempt(store: EmbeddedStore, entry_id: str) -> int:
    """One more run of the entry, written down: a message whose runs take the process down
    must reach its last attempt across restarts, as it does on Redis."""
    attempt = store.inbox.attempt(entry_id)
    await store.hset(keys.SESSIONS_STARTED, entry_id, str(attempt))
    return attempt


async def forget_attempts(store: EmbeddedStore, *entry_ids: str) -> None:
    for entry_id in entry_ids:
        store.inbox.started.pop(entry_id, None)
    await store.hdel(keys.SESSIONS_STARTED, *entry_ids)


def load_state(store: EmbeddedStore) -> InboxState:
    """After opening: every session with pending messages waits for a worker."""
    state = InboxState()
    now = time.time()
    for entry_id, attempts in store.hash_now(keys.SESSIONS_STARTED).items():
        state.started[entry_id] = int(attempts)
    for key, count in store.pending_lists(keys.PENDING_PREFIX):
        state.ready[key.removeprefix(keys.PENDING_PREFIX)] = now
        state.total += count
    return state


async def intake(store: EmbeddedStore, request: IntakeRequest) -> IntakeResult:
    state, session, now = store.inbox, request.session, time.time()
    pending = keys.pending(session)
    with store.transaction():
        if request.seen and not await store.set(
            request.seen, "1", ttl=request.seen_ttl, only_if_absent=True
        ):
            return await _sent_again(store, request, now) or IntakeResult("duplicate")
        if not request.seen and (again := await _sent_again(store, request, now)):
            return again
        count: int | None = None
        if request.rate_key and request.rate_limit > 0:
            count = await store.incr(request.rate_key, ttl=request.rate_ttl)
            if count > request.rate_limit:
                return IntakeResult("rate_limited", rate_count=count)
        queued = store.list_length(pending)
        if queued >= request.max_queued:
            return IntakeResult("queue_full", rate_count=count, queued=queued)
        if state.total >= request.max_total:
            return IntakeResult("overloaded", rate_count=count, queued=queued)
        store.append(pending, request.entry.encode())
        first = request.entry if queued == 0 else None
        claimed = None
        holder = state.holder(session, now)
        if holder is None and request.lease_owner is not None:
            claimed = await _claimed(store, session, request.lease_owner, head=first)
    state.total += 1
    if holder is not None:
        state.ready.setdefault(session, now)
        notice = await store.set(keys.noticed(holder), "1", ttl=NOTICE_TTL, only_if_absent=True)
        return IntakeResult(
            "stored", rate_count=count, queued=queued + 1, holder=holder, notice=notice
        )
    if claimed is None:
        state.ready.setdefault(session, now)
        return IntakeResult("stored", rate_count=count, queued=queued + 1)
    assert request.lease_owner is not None
    token = state.grant(session, request.lease_owner, request.lease_ttl, now)
    claimed = replace(claimed, token=token)
    return IntakeResult("stored", rate_count=count, queued=queued + 1, claimed=claimed)


async def _sent_again(
    store: EmbeddedStore, request: IntakeRequest, now: float
) -> IntakeResult | None:
    """This very request again, its entry pending already: the first answer, and nothing
    stored twice (see Store.intake)."""
    session = request.session
    items = await store.list_range(keys.pending(session))
    if not any(raw.partition("\n")[0] == request.entry.id for raw in items):
        return None
    holder = store.inbox.holder(session, now)
    if request.lease_owner is None or holder != request.lease_owner:
        return IntakeResult("stored", queued=len(items), holder=holder)
    head = InboxEntry.decode(items[0])
    claimed = Claimed(
        session=session,
        entry=head,
        record=await store.get(keys.session(session)),
        owner=request.lease_owner,
        attempt=store.inbox.started.get(head.id, 1),
        reply=await store.get(keys.reply(head.id)),
        token=store.inbox.fences.get(session, 0),
    )
    return IntakeResult("stored", queued=len(items), claimed=claimed)


async def claim(
    store: EmbeddedStore, owner: str, lease_ttl: float, scan: int, limit: int
) -> list[Claimed]:
    state, now = store.inbox, time.time()
    due = sorted((at, s) for s, at in state.ready.items() if at <= now)[:scan]
    taken: list[Claimed] = []
    for _, session in due:
        if len(taken) >= limit:
            break
        if state.holder(session, now) is not None:
            state.ready[session] = state.leases[session][1]
            continue
        found = await _claimed(store, session, owner)
        if found is None:
            del state.ready[session]
            continue
        taken.append(replace(found, token=state.grant(session, owner, lease_ttl, now)))
    return taken


async def finish(
    store: EmbeddedStore,
    session: str,
    entry_id: str,
    owner: str,
    writes: Batch,
    *,
    keep: bool,
    lease_ttl: float,
    record: str | None,
    index: SearchDoc | None,
    token: int | None = None,
    absorbed: tuple[str, ...] = (),
) -> FinishResult:
    state, now = store.inbox, time.time()
    holder = state.holder(session, now)
    if holder is not None and holder != owner:
        return FinishResult("lost")
    if token is not None and not state.fenced(session, token):
        return await _finished_before(
            store, session, entry_id, token, record, owner, holder, keep=keep, lease_ttl=lease_ttl
        )
    for op, _, _ in writes.ops:
        if op not in ("set", "hset"):
            raise ValueError(f"finish writes take set and hset only, not {op!r}")
    pending = keys.pending(session)
    with store.transaction():
        staged = store.search.write(index) if index is not None else None
        await store.run(writes)
        first_two = store.list_first_two(pending)
        head = first_two[0] if first_two else None
        if head is not None and InboxEntry.decode(head).id == entry_id:
            await store.pop_head(pending, last=len(first_two) == 1)
            state.total -= 1
            head = first_two[1] if len(first_two) > 1 else None
        if entry_id:
            await forget_attempts(store, entry_id)
        if absorbed:
            head = await _drop_absorbed(store, pending, set(absorbed))
    if staged is not None:
        store.search.stage(staged)
    if head is None:
        state.ready.pop(session, None)
        state.release(session)
        return FinishResult("released")
    if not keep:
        state.release(session)
        state.ready[session] = now
        return FinishResult("released")
    next_token = state.grant(session, owner, lease_ttl, now)
    entry = InboxEntry.decode(head)
    reply = await store.get(keys.reply(entry.id))
    attempt = await count_attempt(store, entry.id)
    return FinishResult(
        "next", Claimed(session, entry, record, owner, attempt, reply, token=next_token)
    )


async def _finished_before(
    store: EmbeddedStore,
    session: str,
    entry_id: str,
    token: int,
    record: str | None,
    owner: str,
    holder: str | None,
    *,
    keep: bool,
    lease_ttl: float,
) -> FinishResult:
    """The fence moved past `token`: "lost", unless this finish ran before (see the FINISH
    script): the entry is gone and the fence moved by exactly one, the lease kept under this
    run's owner for the next entry (taken back if it lapsed since) or released. `holder` is
    who holds the lease now."""
    state = store.inbox
    if not state.fenced(session, token + 1):
        return FinishResult("lost")
    head = store.list_head(keys.pending(session))
    entry = InboxEntry.decode(head) if head is not None else None
    if entry is not None and entry.id == entry_id:
        return FinishResult("lost")
    if holder is None:
        if not keep or entry is None or entry.id not in state.started:
            return FinishResult("released")
        state.take(session, owner, lease_ttl, time.time())
    elif entry is None:
        return FinishResult("lost")
    claimed = Claimed(
        session,
        entry,
        record,
        owner,
        attempt=state.started.get(entry.id, 1),
        reply=await store.get(keys.reply(entry.id)),
        token=token + 1,
    )
    return FinishResult("next", claimed)


async def _drop_absorbed(store: EmbeddedStore, pending: str, absorbed: set[str]) -> str | None:
    """Remove the absorbed entries wherever they wait; the list's head afterwards."""
    dropped: list[str] = []
    for raw in await store.list_range(pending):
        entry_id = InboxEntry.decode(raw).id
        if entry_id in absorbed:
            await store.remove_item(pending, raw)
            store.inbox.total -= 1
            dropped.append(entry_id)
    if dropped:
        await forget_attempts(store, *dropped)
    return store.list_head(pending)


async def renew(store: EmbeddedStore, held: list[HeldLease], ttl: float) -> list[bool]:
    state, now = store.inbox, time.time()
    renewed = []
    for lease in held:
        with state.lock:
            holder = state.holder(lease.session, now)
            ok = holder == lease.owner
            if lease.token:  # a lapsed lease nobody took (its fence unmoved) is taken back
                ok = state.fenced(lease.session, lease.token) and holder in (lease.owner, None)
            if ok:
                state.take(lease.session, lease.owner, ttl, now)
        renewed.append(ok)
    return renewed


async def claim_reply(
    store: EmbeddedStore, session: str, token: int, entry_id: str, value: str, ttl: float
) -> ReplyClaim:
    # No await between the checks and the write suspends: nothing else on the loop runs.
    existing = await store.get(keys.reply(entry_id))
    if existing == value:  # this claim sent again: see Store.claim_reply
        return ReplyClaim("claimed")
    if not store.inbox.fenced(session, token):
        return ReplyClaim("stale")
    if existing is not None:
        return ReplyClaim("taken", existing)
    await store.set(keys.reply(entry_id), value, ttl=ttl)
    return ReplyClaim("claimed")


async def fenced_write(store: EmbeddedStore, session: str, token: int, writes: Batch) -> bool:
    for op, _, options in writes.ops:
        if op not in ("set", "hset") or options.get("only_if_absent"):
            raise ValueError(f"fenced writes take set and hset only, not {op!r}")
    if not store.inbox.fenced(session, token):
        return False
    await store.run(writes)
    return True


async def remove_pending(store: EmbeddedStore, session: str, entry_id: str) -> bool:
    state, pending = store.inbox, keys.pending(session)
    with store.transaction():
        for raw in await store.list_range(pending):
            if InboxEntry.decode(raw).id == entry_id:
                await store.remove_item(pending, raw)
                break
        else:
            return False
        empty = store.list_head(pending) is None
    state.total -= 1
    await forget_attempts(store, entry_id)
    if empty:
        state.ready.pop(session, None)
    return True


async def replace_pending(
    store: EmbeddedStore, session: str, message_id: str, payload: str
) -> bool:
    state, pending = store.inbox, keys.pending(session)
    with store.transaction():
        for n, raw in enumerate(await store.list_range(pending)):
            entry = InboxEntry.decode(raw)
            if _message_id(entry.payload) != message_id:
                continue
            if n == 0 and state.holder(session, time.time()) is not None:
                return False  # its turn runs
            if await store.get(keys.joined(entry.id)) is not None:
                return False  # a running turn took it in
            return store.replace_item(pending, raw, InboxEntry(entry.id, payload).encode())
    return False


def _message_id(payload: str) -> str | None:
    try:
        value = json.loads(payload).get("message_id")
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


async def drop_pending(store: EmbeddedStore, session: str) -> int:
    state, pending = store.inbox, keys.pending(session)
    with store.transaction():
        entries = await store.list_range(pending)
        await store.delete(pending)
    await forget_attempts(store, *(InboxEntry.decode(raw).id for raw in entries))
    state.ready.pop(session, None)
    state.total -= len(entries)
    return len(entries)


async def stats(store: EmbeddedStore) -> tuple[int, float]:
    state, now = store.inbox, time.time()
    oldest = min(state.ready.values(), default=now)
    return state.total, max(now - oldest, 0.0)


async def _claimed(
    store: EmbeddedStore, session: str, owner: str, *, head: InboxEntry | None = None
) -> Claimed | None:
    """The session's oldest entry as a turn to run under `owner`'s lease; counts the attempt.
    `head`: the entry just stored when it is the only one (it has no reply yet)."""
    fresh = head is not None
    if head is None:
        raw = store.list_head(keys.pending(session))
        if raw is None:
            return None
        head = InboxEntry.decode(raw)
    return Claimed(
        session=session,
        entry=head,
        record=await store.get(keys.session(session)),
        owner=owner,
        attempt=await count_attempt(store, head.id),
        # Read for any older entry: after a restart one whose reply went out has no attempt.
        reply=None if fresh else await store.get(keys.reply(head.id)),
    )
