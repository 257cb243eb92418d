"""The Store contract, run against Redis (a real server and fakeredis) and the embedded store."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import fakeredis
import pytest
import pytest_asyncio

from gateway.store import StoreLocked, StoreUnavailable, open_store
from gateway.store.base import Batch, Store
from gateway.store.embedded import EmbeddedStore
from gateway.store.redis import RedisStore
from tests.fakeredis_wire import store_over
from tests.fixtures_redis import RedisServer

SHORT = 0.2  # a TTL that expires within the test
PROBE = "__probe__"


@pytest_asyncio.fixture
async def fakeredis_store() -> AsyncIterator[RedisStore]:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer(), decode_responses=True)
    store = store_over(client, key_prefix="fake")
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
    ],
)
def store(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


# -- plain values -------------------------------------------------------------------------


async def test_get_set_overwrite(store: Store) -> None:
    assert await store.get("a") is None
    assert await store.set("a", "1") is True
    assert await store.set("a", "2 ünïcode") is True
    assert await store.get("a") == "2 ünïcode"


async def test_ttl_expires_and_plain_set_clears_it(store: Store) -> None:
    await store.set("short", "x", ttl=SHORT)
    await store.set("kept", "x", ttl=SHORT)
    await store.set("kept", "y")  # no ttl: the earlier one is gone
    assert await store.get("short") == "x"
    await asyncio.sleep(SHORT + 0.1)
    assert await store.get("short") is None
    assert await store.get("kept") == "y"


async def test_only_if_absent_has_exactly_one_winner(store: Store) -> None:
    results = await asyncio.gather(
        *(store.set("dedupe", str(i), ttl=5, only_if_absent=True) for i in range(50))
    )
    assert results.count(True) == 1
    assert await store.get("dedupe") == str(results.index(True))


async def test_only_if_absent_after_expiry(store: Store) -> None:
    assert await store.set("k", "old", ttl=SHORT, only_if_absent=True)
    assert not await store.set("k", "new", only_if_absent=True)
    await asyncio.sleep(SHORT + 0.1)
    assert await store.set("k", "new", only_if_absent=True)
    assert await store.get("k") == "new"


async def test_delete_across_types(store: Store) -> None:
    await store.set("v", "1")
    await store.hset("h", "f", "1")
    await store.push("l", "1")
    await store.set("gone", "1", ttl=SHORT)
    await asyncio.sleep(SHORT + 0.1)
    assert await store.delete("v", "h", "l", "gone", "missing") == 3
    assert await store.get("v") is None
    assert await store.hgetall("h") == {}
    assert await store.list_range("l") == []
    assert await store.delete() == 0


async def test_set_replaces_a_hash(store: Store) -> None:
    await store.hset("k", "f", "1")
    await store.set("k", "plain")
    assert await store.get("k") == "plain"
    await store.delete("k")
    await store.hset("k", "g", "2")
    assert await store.hgetall("k") == {"g": "2"}


async def test_incr(store: Store) -> None:
    assert await store.incr("n") == 1
    assert await store.incr("n", 5) == 6
    assert await store.incr("n", -2) == 4
    assert await store.get("n") == "4"


async def test_incr_ttl_applies_only_on_create(store: Store) -> None:
    # Whatever the machine's load, the short window has ended and the long one has not.
    assert await store.incr("kept", ttl=600) == 1
    assert await store.incr("kept", ttl=SHORT) == 2  # must not change the window
    assert await store.incr("rate", ttl=SHORT) == 1
    await asyncio.sleep(SHORT + 0.1)
    assert await store.get("kept") == "2"
    assert await store.get("rate") is None
    assert await store.incr("rate", ttl=10) == 1


async def test_an_increment_sent_again_with_its_id_counts_once(store: Store) -> None:
    """What the usage ledger relies on when it sends a flush again after a failure."""
    assert await store.incr("o:n", 5, once="flush-1") == 5
    assert await store.incr("o:n", 5, once="flush-1") == 5  # sent again: the value, unchanged
    assert await store.incr("o:n", 2, once="flush-2") == 7
    assert await store.incr("o:m", 3, ttl=60, once="flush-1") == 3  # ids are per counter
    results = await store.run(
        Batch()
        .incr("o:n", 5, once="flush-1")
        .incr("o:n", 1, once="flush-3")
        .incr("o:m", 3, ttl=60, once="flush-1")
        .incr("o:m", 1)
        .incr("o:m", 1)  # without an id, each one counts
    )
    assert results == [7, 8, 3, 4, 5]
    assert (await store.get("o:n"), await store.get("o:m")) == ("8", "5")


async def test_expire_any_type(store: Store) -> None:
    assert await store.expire("missing", 1) is False
    await store.set("v", "1")
    await store.hset("h", "f", "1")
    await store.push("l", "1")
    for key in ("v", "h", "l"):
        assert await store.expire(key, SHORT) is True
    assert await store.hget("h", "f") == "1"
    await asyncio.sleep(SHORT + 0.1)
    assert await store.get("v") is None
    assert await store.hgetall("h") == {}
    assert await store.hget("h", "f") is None
    assert await store.list_range("l") == []
    assert await store.expire("v", 1) is False


async def test_expired_containers_come_back_empty(store: Store) -> None:
    await store.hset("h", "old", "1")
    await store.push("l", "old")
    await store.expire("h", SHORT)
    await store.expire("l", SHORT)
    await asyncio.sleep(SHORT + 0.1)
    await store.hset("h", "new", "2")
    assert await store.push("l", "new") == 1
    assert await store.hgetall("h") == {"new": "2"}
    assert await store.list_range("l") == ["new"]


# -- hashes and lists ---------------------------------------------------------------------


async def test_hashes(store: Store) -> None:
    assert await store.hgetall("job") == {}
    assert await store.hget("job", "a") is None
    await store.hset("job", "a", "1")
    await store.hset("job", "b", "2")
    await store.hset("job", "a", "3")
    assert await store.hget("job", "a") == "3"
    assert await store.hgetall("job") == {"a": "3", "b": "2"}
    assert await store.hdel("job", "a", "missing") == 1
    assert await store.hdel("job") == 0
    assert await store.hdel("job", "b") == 1
    # A hash without fields does not exist.
    assert await store.expire("job", 1) is False
    assert await store.delete("job") == 0


async def test_push_trims_to_max_len(store: Store) -> None:
    assert await store.push("log", "a") == 1
    assert await store.push("log", "b") == 2
    assert await store.push("log", "c", max_len=2) == 2
    assert await store.list_range("log") == ["b", "c"]
    for item in "defg":
        await store.push("log", item, max_len=3)
    assert await store.list_range("log") == ["e", "f", "g"]
    with pytest.raises(ValueError):
        await store.push("log", "x", max_len=0)


async def test_list_range_matches_redis_lrange(store: Store) -> None:
    def lrange(items: list[str], start: int, end: int) -> list[str]:
        n = len(items)
        start = max(n + start, 0) if start < 0 else start
        end = min(n + end if end < 0 else end, n - 1)
        return items[start : end + 1] if start <= end else []

    items = [str(i) for i in range(5)]
    for item in items:
        await store.push("seq", item)
    assert await store.list_range("seq", -2) == ["3", "4"]
    assert await store.list_range("seq", 1, -2) == ["1", "2", "3"]
    for start in range(-7, 7):
        for end in range(-7, 7):
            assert await store.list_range("seq", start, end) == lrange(items, start, end), (
                start,
                end,
            )
    assert await store.list_range("missing", -3) == []


# -- leases -------------------------------------------------------------------------------


async def test_leases(store: Store) -> None:
    assert await store.lease_owner("turn") is None
    assert await store.acquire_lease("turn", "a", 10)
    assert not await store.acquire_lease("turn", "b", 10)
    assert await store.lease_owner("turn") == "a"
    assert not await store.renew_lease("turn", "b", 10)
    assert not await store.release_lease("turn", "b")
    assert await store.lease_owner("turn") == "a"
    assert await store.renew_lease("turn", "a", 10)
    assert await store.release_lease("turn", "a")
    assert not await store.release_lease("turn", "a")
    assert not await store.renew_lease("turn", "a", 10)
    assert await store.lease_owner("turn") is None
    assert await store.acquire_lease("turn", "b", 10)


async def test_lease_reacquire_by_owner_refreshes(store: Store) -> None:
    assert await store.acquire_lease("turn", "a", SHORT)
    await asyncio.sleep(SHORT / 2)
    assert await store.acquire_lease("turn", "a", 10)
    await asyncio.sleep(SHORT / 2 + 0.1)
    assert await store.lease_owner("turn") == "a"


async def test_lease_expiry_lets_another_owner_in(store: Store) -> None:
    assert await store.acquire_lease("turn", "a", SHORT)
    await asyncio.sleep(SHORT + 0.1)
    assert await store.lease_owner("turn") is None
    assert not await store.renew_lease("turn", "a", 10)
    assert await store.acquire_lease("turn", "b", 10)
    assert not await store.release_lease("turn", "a")
    assert await store.lease_owner("turn") == "b"


async def test_lease_acquire_is_atomic(store: Store) -> None:
    results = await asyncio.gather(*(store.acquire_lease("x", f"o{i}", 5) for i in range(50)))
    assert results.count(True) == 1
    assert await store.lease_owner("x") == f"o{results.index(True)}"


# -- pub/sub ------------------------------------------------------------------------------


def listen(store: Store, channel: str) -> AsyncGenerator[str, None]:
    return store.listen(channel)


class Listener:
    """Consumes `store.listen(channel)` in a task, so a test can publish and then read."""

    def __init__(self, store: Store, channel: str) -> None:
        self.store = store
        self.channel = channel
        self.received: asyncio.Queue[str] = asyncio.Queue()
        self.task = asyncio.create_task(self._consume())

    async def _consume(self) -> None:
        async with contextlib.aclosing(listen(self.store, self.channel)) as messages:
            async for message in messages:
                await self.received.put(message)

    async def next(self, within: float = 2.0) -> str:
        """The next real message, skipping readiness probes."""
        while True:
            message = await asyncio.wait_for(self.received.get(), within)
            if message != PROBE:
                return message

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def until_subscribed(store: Store, *listeners: Listener) -> None:
    """Publish probes until every listener got one (subscribing is asynchronous)."""
    waiting = set(listeners)
    deadline = time.monotonic() + 10
    while waiting:
        assert time.monotonic() < deadline, "listener never subscribed"
        with contextlib.suppress(StoreUnavailable):
            await store.publish(listeners[0].channel, PROBE)
        await asyncio.sleep(0.02)
        for listener in list(waiting):
            while not listener.received.empty():
                if listener.received.get_nowait() == PROBE:
                    waiting.discard(listener)


async def subscriber_count(store: Store, channel: str) -> int:
    if isinstance(store, RedisStore):
        _, count = await store._r.call("PUBSUB", "NUMSUB", store.keys.channel(channel))
        return int(count)
    assert isinstance(store, EmbeddedStore)
    return len(store._listeners.get(channel, ()))


async def wait_for_count(store: Store, channel: str, expected: int) -> None:
    deadline = time.monotonic() + 3
    while await subscriber_count(store, channel) != expected:
        assert time.monotonic() < deadline, f"subscribers never reached {expected}"
        await asyncio.sleep(0.02)


async def test_publish_reaches_every_listener(store: Store) -> None:
    await store.publish("news", "nobody listens")  # no error without listeners
    first, second = Listener(store, "news"), Listener(store, "news")
    other = Listener(store, "other")
    await until_subscribed(store, first, second)
    await until_subscribed(store, other)
    await store.publish("news", "hello")
    await store.publish("news", "world")
    assert [await first.next(), await first.next()] == ["hello", "world"]
    assert [await second.next(), await second.next()] == ["hello", "world"]
    with pytest.raises(TimeoutError):
        await other.next(within=0.2)
    for listener in (first, second, other):
        await listener.stop()


async def test_listen_cleans_up_when_iteration_stops(store: Store) -> None:
    # Stopping by cancelling the consuming task.
    listener = Listener(store, "c")
    await until_subscribed(store, listener)
    assert await subscriber_count(store, "c") == 1
    await listener.stop()
    await wait_for_count(store, "c", 0)

    # Stopping by breaking out and closing the iterator.
    async def first_message() -> str:
        async with contextlib.aclosing(listen(store, "c")) as messages:
            async for message in messages:
                return message
        raise AssertionError("listen ended")

    task = asyncio.create_task(first_message())
    deadline = time.monotonic() + 5
    while not task.done():
        assert time.monotonic() < deadline
        await store.publish("c", "hi")
        await asyncio.sleep(0.02)
    assert task.result() == "hi"
    await wait_for_count(store, "c", 0)


async def test_listen_ends_when_the_store_closes(store: Store) -> None:
    listener = Listener(store, "c")
    await until_subscribed(store, listener)
    await store.close()
    await asyncio.wait_for(listener.task, 3)


# -- lifecycle and helpers ----------------------------------------------------------------


async def test_ping_and_shared(store: Store) -> None:
    await store.ping()
    assert store.shared is isinstance(store, RedisStore)


async def test_json_helpers(store: Store) -> None:
    assert await store.get_json("j") is None
    value = {"text": "héllo", "n": [1, 2.5, None], "ok": True}
    await store.set_json("j", value, ttl=SHORT)
    assert await store.get_json("j") == value
    assert await store.get("j") == '{"text":"héllo","n":[1,2.5,null],"ok":true}'
    await asyncio.sleep(SHORT + 0.1)
    assert await store.get_json("j") is None


async def test_ttl_must_be_positive(store: Store) -> None:
    with pytest.raises(ValueError):
        await store.set("k", "v", ttl=0)
    with pytest.raises(ValueError):
        await store.acquire_lease("l", "o", -1)


# -- embedded store: durability and single-process lock -----------------------------------


async def test_embedded_survives_reopen(tmp_path: Path) -> None:
    first = EmbeddedStore(tmp_path)
    await first.set("v", "1")
    await first.set("short", "1", ttl=SHORT)
    await first.hset("h", "f", "1")
    await first.push("l", "a")
    await first.push("l", "b")
    await first.incr("n", 3)
    await first.acquire_lease("lease", "me", 30)
    await first.close()
    await asyncio.sleep(SHORT + 0.1)

    second = EmbeddedStore(tmp_path)
    try:
        assert await second.get("v") == "1"
        assert await second.get("short") is None
        assert await second.hgetall("h") == {"f": "1"}
        assert await second.list_range("l") == ["a", "b"]
        assert await second.incr("n") == 4
        assert await second.lease_owner("lease") == "me"
    finally:
        await second.close()
    assert (tmp_path / "chatgate.db").is_file()


async def test_embedded_purges_expired_rows(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    try:
        await store.set("gone", "1", ttl=SHORT)
        await store.hset("h", "f", "1")
        await store.expire("h", SHORT)
        await asyncio.sleep(SHORT + 0.1)
        store._next_purge = 0  # the next write sweeps
        await store.set("other", "1")
        tables = ("keys", "fields")
        counts = [store._db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables]
        assert counts == [1, 0]
    finally:
        await store.close()


async def test_embedded_is_locked_to_one_process(tmp_path: Path) -> None:
    data_dir = tmp_path / "nested" / "data"
    store = EmbeddedStore(data_dir)
    try:
        code = (
            "import pathlib, sys\n"
            "from gateway.store import StoreLocked\n"
            "from gateway.store.embedded import EmbeddedStore\n"
            "try:\n"
            "    EmbeddedStore(pathlib.Path(sys.argv[1]))\n"
            "except StoreLocked as exc:\n"
            "    print(exc)\n"
            "    sys.exit(3)\n"
        )
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            str(data_dir),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(child.communicate(), 30)
        assert child.returncode == 3, err.decode()
        assert str(data_dir) in out.decode()
        assert "redis.url" in out.decode()
        with pytest.raises(StoreLocked, match="another chatgate process"):
            EmbeddedStore(data_dir)
    finally:
        await store.close()
    await EmbeddedStore(data_dir).close()  # free again once closed


# -- Redis: outages -----------------------------------------------------------------------


async def test_redis_outage_raises_store_unavailable_then_recovers(
    redis_server: RedisServer,
) -> None:
    store = RedisStore(redis_server.url, key_prefix="outage", retries=1, socket_timeout=0.5)
    try:
        await store.set("k", "v")
        redis_server.stop()
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("k")
        assert time.monotonic() - started < 2
        assert f"127.0.0.1:{redis_server.port}" in str(caught.value)
        assert "\n" not in str(caught.value)
        with pytest.raises(StoreUnavailable):
            await store.ping()
        redis_server.start()
        await store.ping()
        assert await store.set("k", "again")
        assert await store.get("k") == "again"
    finally:
        await store.close()


async def test_redis_unavailable_message_hides_the_password() -> None:
    port = 1  # nothing listens there
    store = RedisStore(f"redis://user:s3cret-pw@127.0.0.1:{port}/0", retries=0)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.get("k")
        assert "s3cret-pw" not in str(caught.value)
        assert "127.0.0.1:1" in str(caught.value)
    finally:
        await store.close()


async def test_listen_survives_a_redis_restart(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, key_prefix="restart", retries=1, socket_timeout=0.5)
    listener = Listener(store, "events")
    try:
        await until_subscribed(store, listener)
        await store.publish("events", "before")
        assert await listener.next() == "before"
        redis_server.stop()
        await asyncio.sleep(1.0)  # longer than redis-py's own retries: listen must start over
        assert not listener.task.done()
        redis_server.start()
        await until_subscribed(store, listener)
        await store.publish("events", "after")
        assert await listener.next() == "after"
        assert not listener.task.done()
    finally:
        await listener.stop()
        await store.close()


# -- open_store ---------------------------------------------------------------------------


async def test_open_store_picks_the_backend(tmp_path: Path, redis_url: str) -> None:
    from gateway.config import Settings

    embedded = open_store(Settings(data_dir=tmp_path))
    assert isinstance(embedded, EmbeddedStore)
    await embedded.close()
    prefix = f"open-{uuid.uuid4().hex[:8]}"
    shared = open_store(Settings(data_dir=tmp_path, redis={"url": redis_url, "key_prefix": prefix}))
    assert isinstance(shared, RedisStore)
    await shared.set("k", "v")
    assert shared.keys.data("k") == f"{prefix}:k:k"
    await shared.close()


async def test_the_store_over_fakeredis_needs_decoded_responses() -> None:
    client = fakeredis.FakeAsyncRedis(server=fakeredis.FakeServer())
    with pytest.raises(ValueError, match="decode_responses"):
        store_over(client)
    await client.aclose()


async def test_embedded_closed_is_unavailable(tmp_path: Path) -> None:
    store = EmbeddedStore(tmp_path)
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.get("k")
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.ping()


# -- batches --------------------------------------------------------------------------------


async def test_batch_results_match_the_single_calls(store: Store) -> None:
    await store.set("b:seen", "1")
    results = await store.run(
        Batch()
        .set("b:seen", "2", ttl=5, only_if_absent=True)
        .set("b:new", "v", ttl=5, only_if_absent=True)
        .incr("b:count", 3, ttl=5)
        .incr("b:plain")
        .acquire_lease("b:lease", "me", 5)
        .lease_owner("b:lease")
        .get("b:new")
        .release_lease("b:lease", "someone-else")
        .release_lease("b:lease", "me")
    )
    assert results == [False, True, 3, 1, True, "me", "v", False, True]
    assert await store.get("b:seen") == "1"
    assert await store.lease_owner("b:lease") is None


async def test_runs_of_counters_and_hash_fields_in_a_batch(store: Store) -> None:
    """The Redis store sends a run of counters with a TTL as one script call and a run of
    HSETs on one hash as one HSET; each operation still gets its own result, in order."""
    await store.incr("r:a", 10, ttl=60)
    results = await store.run(
        Batch()
        .incr("r:a", 1, ttl=5)
        .incr("r:b", 2, ttl=5)
        .incr("r:c", 3, ttl=5)
        .get("r:a")
        .incr("r:b", 4, ttl=5)
        .incr("r:plain", 5)
        .hset("r:index", "x", "1")
        .hset("r:index", "y", "2")
        .hset("r:other", "z", "3")
        .incr("r:c", 1, ttl=5)
    )
    assert results == [11, 2, 3, "11", 6, 5, None, None, None, 4]
    assert await store.hgetall("r:index") == {"x": "1", "y": "2"}
    assert await store.hgetall("r:other") == {"z": "3"}


async def test_batch_of_one_and_empty(store: Store) -> None:
    assert await store.run(Batch()) == []
    assert await store.run(Batch().get("b:missing")) == [None]


async def test_batch_after_the_server_lost_its_scripts(redis_store: RedisStore) -> None:
    """A Redis restart empties the script cache: writes in the batch still run once."""
    await redis_store.run(Batch().acquire_lease("s:warm", "w", 5).get("s:x"))
    await redis_store._r.call("SCRIPT", "FLUSH")
    results = await redis_store.run(
        Batch()
        .set("s:seen", "1", ttl=5, only_if_absent=True)
        .acquire_lease("s:lease", "me", 5)
        .get("s:seen")
        .incr("s:count", ttl=5)
        .incr("s:other", 2, ttl=5)
    )
    assert results == [True, True, "1", 1, 2]
    assert await redis_store.get("s:count") == "1"
    assert await redis_store.get("s:other") == "2"


async def test_a_batch_reads_in_order_when_the_server_had_only_some_scripts(
    redis_store: RedisStore,
) -> None:
    """One script used alone after a restart loads every script: a batch whose counter
    script was missing while its lease scripts were there re-read the lease after the
    batch's own release (None where "me" was due)."""
    await redis_store._r.call("SCRIPT", "FLUSH")
    await redis_store.acquire_lease("s:warm", "w", 5)  # lease scripts alone, first
    await redis_store.release_lease("s:warm", "w")
    results = await redis_store.run(
        Batch()
        .incr("s:count", 3, ttl=5)
        .acquire_lease("s:lease", "me", 5)
        .lease_owner("s:lease")
        .release_lease("s:lease", "me")
    )
    assert results == [3, True, "me", True]


async def test_a_run_of_counters_sets_a_ttl_on_new_ones_only(redis_store: RedisStore) -> None:
    await redis_store.incr("t:old", 1, ttl=600)
    assert await redis_store.run(Batch().incr("t:old", 1, ttl=5).incr("t:new", 1, ttl=5)) == [2, 1]
    old = await redis_store._r.call("PTTL", redis_store.keys.data("t:old"))
    new = await redis_store._r.call("PTTL", redis_store.keys.data("t:new"))
    assert old > 500_000 and 0 < new <= 5_000
