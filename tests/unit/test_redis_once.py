"""Counter increments and list appends on Redis count once when their reply is lost:
redis-py sends the pipeline again on a new connection, and the write's id, kept beside its
key, makes the second one change nothing (gateway/store/redis_once.py)."""

from __future__ import annotations

import uuid

import pytest

from gateway.store.base import Batch
from gateway.store.redis import RedisStore
from gateway.store.redis_once import ONCE_KEEP, ids_key
from tests.reply_losing_proxy import reply_losing_proxy

pytestmark = pytest.mark.redis


async def test_an_increment_whose_reply_was_lost_counts_once(redis_url: str) -> None:
    async with reply_losing_proxy(redis_url) as proxy:
        store = RedisStore(proxy.url, key_prefix=f"once-{uuid.uuid4().hex[:8]}")
        try:
            assert await store.incr("warm") == 1  # connected: the next reply is the counter's
            proxy.losing = 1
            assert await store.incr("n", 5, ttl=60) == 5
            proxy.losing = 1
            batch = Batch().incr("n", 1).incr("m", 2, ttl=60).get("n")
            assert await store.run(batch) == [6, 2, "6"]
            assert proxy.lost == 2  # each was sent twice, on a new connection
            assert (await store.get("n"), await store.get("m")) == ("6", "2")
        finally:
            await store.close()


async def test_an_append_whose_reply_was_lost_counts_once(redis_url: str) -> None:
    """A capped log (the approvals audit) gets the line once, and keeps its length."""
    async with reply_losing_proxy(redis_url) as proxy:
        store = RedisStore(proxy.url, key_prefix=f"once-{uuid.uuid4().hex[:8]}")
        try:
            assert await store.push("log", "a", max_len=2) == 1  # connected, scripts loaded
            proxy.losing = 1
            assert await store.push("log", "b", max_len=2) == 2
            proxy.losing = 1
            assert await store.push("log", "c", max_len=2) == 2
            assert proxy.lost == 2
            assert await store.list_range("log") == ["b", "c"]
        finally:
            await store.close()


async def test_a_counter_keeps_only_its_latest_ids(redis_store: RedisStore) -> None:
    """An id is kept for a while and among the last ONCE_KEEP of its counter: a busy counter
    does not grow a set of every increment it ever took."""
    for n in range(ONCE_KEEP + 20):
        await redis_store.incr("busy", once=f"id-{n}")
    ids = ids_key(redis_store.keys.data("busy"), cluster=False)
    assert ids is not None
    assert await redis_store._r.call("ZCARD", ids) == ONCE_KEEP
    assert 0 < await redis_store._r.call("PTTL", ids) <= 600_000
    assert await redis_store.incr("busy", once=f"id-{ONCE_KEEP + 19}") == ONCE_KEEP + 20  # kept
    assert await redis_store.incr("busy", once="id-0") == ONCE_KEEP + 21  # forgotten


def test_the_ids_of_a_cluster_counter_share_its_slot() -> None:
    from redis.crc import key_slot

    for counter in ("chatgate:k:usage:d2025-03-31:user:slack:U1:in", "p:{tag}:k:rate:x"):
        ids = ids_key(counter, cluster=True)
        assert ids is not None and key_slot(ids.encode()) == key_slot(counter.encode()), ids
    assert ids_key("chatgate:k:rate:odd}name", cluster=True) is None  # counts at least once
