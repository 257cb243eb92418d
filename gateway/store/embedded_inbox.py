"""The session inbox on the embedded store: each operation is one SQLite transaction built
from the store's own primitives, with the same results as the Redis scripts
(gateway/store/redis_inbox.py); tests/unit/test_inbox_contract.py runs both."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gateway import keys
from gateway.store.base import Batch
from gateway.store.inbox import Claimed, FinishResult, InboxEntry, IntakeRequest, IntakeResult

if TYPE_CHECKING:
    from gateway.store.embedded import EmbeddedStore

NOTICE_TTL = 3600.0

# The ready set is a hash: session -> when a worker may take it (unix time as text): when it
# was queued while nobody runs it, its lease's expiry while someone does.
READY_NOW = (
    "SELECT field FROM fields WHERE key = ?1 AND CAST(value AS REAL) <= ?2 "
    "ORDER BY CAST(value AS REAL), field LIMIT ?3"
)


def _at(moment: float) -> str:
    return repr(moment)  # exact: a rounded-up time would not be due yet when read back


async def intake(store: EmbeddedStore, request: IntakeRequest) -> IntakeResult:
    session = request.session
    pending = keys.pending(session)
    with store.transaction():
        if request.seen and not await store.set(
            request.seen, "1", ttl=request.seen_ttl, only_if_absent=True
        ):
            return IntakeResult("duplicate")
        count: int | None = None
        if request.rate_key and request.rate_limit > 0:
            count = await store.incr(request.rate_key, ttl=request.rate_ttl)
            if count > request.rate_limit:
                return IntakeResult("rate_limited", rate_count=count)
        queued = len(await store.list_range(pending))
        if queued >= request.max_queued:
            return IntakeResult("queue_full", rate_count=count, queued=queued)
        total = int(await store.get(keys.PENDING_TOTAL) or 0)
        if total >= request.max_total:
            return IntakeResult("overloaded", rate_count=count, queued=queued)
        await store.push(pending, request.entry.encode())
        await store.incr(keys.PENDING_TOTAL)
        now = time.time()
        lease = keys.session_lease(session)
        holder = await store.lease_owner(lease)
        waits = holder is not None or request.lease_owner is None
        if waits and await store.hget(keys.SESSIONS_READY, session) is None:
            await store.hset(keys.SESSIONS_READY, session, _at(now))
        if holder is not None:
            notice = await store.set(keys.noticed(holder), "1", ttl=NOTICE_TTL, only_if_absent=True)
            return IntakeResult(
                "stored", rate_count=count, queued=queued + 1, holder=holder, notice=notice
            )
        if request.lease_owner is None:
            return IntakeResult("stored", rate_count=count, queued=queued + 1)
        await store.acquire_lease(lease, request.lease_owner, request.lease_ttl)
        await store.hset(keys.SESSIONS_READY, session, _at(now + request.lease_ttl))
        claimed = await _claimed(store, session, request.lease_owner)
        assert claimed is not None
        return IntakeResult("stored", rate_count=count, queued=queued + 1, claimed=claimed)


async def claim(
    store: EmbeddedStore, owner: str, lease_ttl: float, scan: int, limit: int
) -> list[Claimed]:
    taken: list[Claimed] = []
    with store.transaction():
        now = time.time()
        rows = store.query(READY_NOW, (keys.SESSIONS_READY, now, scan))
        for (session,) in rows:
            if len(taken) >= limit:
                break
            lease = keys.session_lease(session)
            if await store.lease_owner(lease) is not None:
                await store.hset(keys.SESSIONS_READY, session, _at(now + lease_ttl))
                continue
            if not await store.list_range(keys.pending(session), 0, 0):
                await store.hdel(keys.SESSIONS_READY, session)
                continue
            await store.acquire_lease(lease, owner, lease_ttl)
            await store.hset(keys.SESSIONS_READY, session, _at(now + lease_ttl))
            claimed = await _claimed(store, session, owner)
            assert claimed is not None
            taken.append(claimed)
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
) -> FinishResult:
    lease = keys.session_lease(session)
    pending = keys.pending(session)
    with store.transaction():
        holder = await store.lease_owner(lease)
        if holder is not None and holder != owner:
            return FinishResult("lost")
        for op, _, _ in writes.ops:
            if op not in ("set", "hset"):
                raise ValueError(f"finish writes take set and hset only, not {op!r}")
        await store.run(writes)
        head = await store.list_range(pending, 0, 0)
        if head and InboxEntry.decode(head[0]).id == entry_id:
            await store.pop_head(pending)
            await store.incr(keys.PENDING_TOTAL, -1)
        await store.hdel(keys.SESSIONS_STARTED, entry_id)
        if not await store.list_range(pending, 0, 0):
            await store.hdel(keys.SESSIONS_READY, session)
            await store.release_lease(lease, owner)
            return FinishResult("released")
        if not keep:
            await store.release_lease(lease, owner)
            await store.hset(keys.SESSIONS_READY, session, _at(time.time()))
            return FinishResult("released")
        await store.acquire_lease(lease, owner, lease_ttl)
        await store.hset(keys.SESSIONS_READY, session, _at(time.time() + lease_ttl))
        claimed = await _claimed(store, session, owner, record=record, read_record=False)
    assert claimed is not None
    return FinishResult("next", claimed)


async def renew(store: EmbeddedStore, held: list[tuple[str, str]], ttl: float) -> list[bool]:
    renewed = []
    with store.transaction():
        for session, owner in held:
            ok = await store.renew_lease(keys.session_lease(session), owner, ttl)
            if ok and await store.hget(keys.SESSIONS_READY, session) is not None:
                await store.hset(keys.SESSIONS_READY, session, _at(time.time() + ttl))
            renewed.append(ok)
    return renewed


async def remove_pending(store: EmbeddedStore, session: str, entry_id: str) -> bool:
    pending = keys.pending(session)
    with store.transaction():
        for raw in await store.list_range(pending):
            if InboxEntry.decode(raw).id == entry_id:
                await store.remove_item(pending, raw)
                await store.incr(keys.PENDING_TOTAL, -1)
                await store.hdel(keys.SESSIONS_STARTED, entry_id)
                if not await store.list_range(pending, 0, 0):
                    await store.hdel(keys.SESSIONS_READY, session)
                return True
    return False


async def stats(store: EmbeddedStore) -> tuple[int, float]:
    total = int(await store.get(keys.PENDING_TOTAL) or 0)
    rows = store.query(READY_NOW, (keys.SESSIONS_READY, float("inf"), 1))
    if not rows:
        return total, 0.0
    since = float(await store.hget(keys.SESSIONS_READY, rows[0][0]) or time.time())
    return total, max(time.time() - since, 0.0)


async def drop_pending(store: EmbeddedStore, session: str) -> int:
    pending = keys.pending(session)
    with store.transaction():
        entries = await store.list_range(pending)
        for raw in entries:
            await store.hdel(keys.SESSIONS_STARTED, InboxEntry.decode(raw).id)
        await store.delete(pending)
        await store.hdel(keys.SESSIONS_READY, session)
        if entries:
            await store.incr(keys.PENDING_TOTAL, -len(entries))
    return len(entries)


async def _claimed(
    store: EmbeddedStore,
    session: str,
    owner: str,
    *,
    record: str | None = None,
    read_record: bool = True,
) -> Claimed | None:
    """The session's oldest entry as a turn to run under `owner`'s lease; counts the attempt."""
    head = await store.list_range(keys.pending(session), 0, 0)
    if not head:
        return None
    entry = InboxEntry.decode(head[0])
    attempt = int(await store.hget(keys.SESSIONS_STARTED, entry.id) or 0) + 1
    await store.hset(keys.SESSIONS_STARTED, entry.id, str(attempt))
    return Claimed(
        session=session,
        entry=entry,
        record=await store.get(keys.session(session)) if read_record else record,
        owner=owner,
        attempt=attempt,
        reply=await store.get(keys.reply(entry.id)),
    )
