"""The Redis store on a real Redis Cluster (three masters, three replicas on 127.0.0.1): the
names of what one script touches share a slot, one server and Sentinel keep the names they
had, sessions spread over the masters, and `chatgate doctor` shows the topology."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from redis.crc import key_slot

from gateway.app.app import load_settings
from gateway.app.doctor import run_checks
from gateway.store import keys
from gateway.store.base import Batch
from gateway.store.inbox import Claimed, InboxEntry, IntakeRequest
from gateway.store.redis import RedisStore
from gateway.store.redis_base import RedisKeys
from gateway.store.redis_topology import describe_topology
from tests.fixtures_redis_ha import RedisClusterSet

SESSION = "telegram:-100123:t7"


def test_one_server_keeps_its_names() -> None:
    # A deployment on one server or Sentinel upgraded in place reads what it wrote before.
    plain = RedisKeys("gw")
    assert plain.data(keys.pending(SESSION)) == f"gw:k:pending:{SESSION}"
    assert plain.data(keys.SESSIONS_READY) == "gw:k:sessions:ready"
    assert plain.near(SESSION, keys.reply("e1")) == "gw:k:reply:e1"
    assert plain.lease(keys.session_lease(SESSION)) == f"gw:lease:lease:session:{SESSION}"
    assert plain.data(keys.search_doc("t1")) == "gw:k:search:doc:t1"


def test_a_sessions_script_keys_share_one_slot() -> None:
    tagged = RedisKeys("gw", shards=16)
    shard = tagged.shard(SESSION)
    names = [
        tagged.data(keys.pending(SESSION)),
        tagged.data(keys.session(SESSION)),
        tagged.data(keys.fence(SESSION)),
        tagged.lease(keys.session_lease(SESSION)),
        tagged.near(SESSION, keys.reply("e1")),
        tagged.near(SESSION, keys.joined("e2")),
        tagged.at(shard, keys.SESSIONS_READY),
        tagged.at(shard, keys.SESSIONS_STARTED),
        tagged.at(shard, keys.PENDING_TOTAL),
    ]
    assert len({key_slot(n.encode()) for n in names}) == 1
    assert all(tagged.same_slot(n, SESSION) for n in names)
    # What spans chats has a tag of its own, or none.
    assert tagged.data(keys.PENDING_TOTAL) == "gw:k:pending:total"
    search = [tagged.data(keys.search_doc("t1")), tagged.data(keys.search_session(SESSION))]
    assert len({key_slot(n.encode()) for n in search}) == 1
    assert not tagged.same_slot(tagged.data(keys.CHATS), SESSION)


@pytest.mark.redis
async def test_sessions_spread_over_every_master(redis_cluster: RedisClusterSet) -> None:
    store = RedisStore(key_prefix=f"spread-{uuid.uuid4().hex[:8]}", target=redis_cluster.target())
    try:
        for n in range(64):
            await store.run(Batch().set(keys.session(f"telegram:{n}"), "{}"))
        masters = Counter(
            redis_cluster.master_of_slot(
                key_slot(store.keys.data(keys.session(f"telegram:{n}")).encode())
            ).port
            for n in range(64)
        )
        assert len(masters) == 3, masters
    finally:
        await store.close()


@pytest.mark.redis
async def test_doctor_shows_masters_slots_and_replicas(
    redis_cluster: RedisClusterSet, tmp_path: Path
) -> None:
    described = await describe_topology(redis_cluster.target())
    assert described.startswith("cluster ok, 3 master(s), 3 replica(s): "), described
    assert described.count("master 127.0.0.1:") == 3 and described.count("replica 127.0.0.1:") == 3
    slots = [int(n) for n in re.findall(r"(\d+) slots", described)]
    assert sum(slots) == 16384
    assert " ms" in described and "unreachable" not in described
    settings = load_settings(
        None, data_dir=str(tmp_path), redis={"cluster_nodes": redis_cluster.addresses[:1]}
    )
    results = {r.name: r for r in await run_checks(settings)}
    assert results["store"].ok and "3 master(s)" in results["store"].detail, results["store"]


@pytest.mark.redis
async def test_commands_and_a_listener_follow_a_failover(
    own_redis_cluster: RedisClusterSet,
) -> None:
    servers = own_redis_cluster
    store = RedisStore(key_prefix="follow", target=servers.target())
    channel = store.keys.channel("control")
    # The node the subscription starts on serves the channel name's slot: that one dies.
    slot = key_slot(channel.encode())
    victim = servers.master_of_slot(slot)
    heard: list[str] = []
    messages = store.listen("control")

    async def consume() -> None:
        async for message in messages:
            heard.append(message)

    listener = asyncio.create_task(consume())
    try:
        await eventually_heard(store, heard, "before")
        name = f"k{{{channel}}}"  # a hash tag: the channel name's slot
        assert _slot(store, name) == slot
        assert await store.set(name, "1")
        victim.kill()
        # Sent while the cluster has not noticed yet: retried until a replica took the slots.
        assert await store.set(name, "2")
        assert servers.master_of_slot(slot).port != victim.port
        assert await store.get(name) == "2"
        await eventually_heard(store, heard, "after")
    finally:
        listener.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listener
        await messages.aclose()
        await store.close()


def _slot(store: RedisStore, key: str) -> int:
    return key_slot(store.keys.data(key).encode())


async def eventually_heard(store: RedisStore, heard: list[str], text: str) -> None:
    """Publish `text` until the listener hears it (a subscription takes a moment, and moves
    to another node after a failure)."""
    for _ in range(200):
        await store.publish("control", text)
        await asyncio.sleep(0.1)
        if text in heard:
            return
    raise AssertionError(f"{text!r} never heard; heard {heard}")


def move_slot(servers: RedisClusterSet, slot: int, pause: float) -> tuple[int, int]:
    """Move `slot` to another master as `redis-cli --cluster reshard` does (IMPORTING and
    MIGRATING, then MIGRATE a few keys at a time, `pause` between batches, then the new
    owner for everyone); returns the (source, target) ports."""
    source = servers.master_of_slot(slot)
    target = next(
        s
        for s in servers.nodes
        if s is not source and servers.client(s.port).info("replication")["role"] == "master"
    )
    src, dst = servers.client(source.port), servers.client(target.port)
    src_id = src.execute_command("CLUSTER MYID")  # type: ignore[no-untyped-call]
    dst_id = dst.execute_command("CLUSTER MYID")  # type: ignore[no-untyped-call]
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)  # type: ignore[no-untyped-call]
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)  # type: ignore[no-untyped-call]
    while names := src.execute_command("CLUSTER GETKEYSINSLOT", slot, 3):  # type: ignore[no-untyped-call]
        src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *names)  # type: ignore[no-untyped-call]
        time.sleep(pause)
    for client in (dst, src):
        client.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)  # type: ignore[no-untyped-call]
    src.close()
    dst.close()
    return source.port, target.port


@pytest.mark.redis
async def test_a_shard_moved_to_another_master_mid_run_loses_nothing(
    own_redis_cluster: RedisClusterSet,
) -> None:
    servers = own_redis_cluster
    store = RedisStore(key_prefix="move", target=servers.target(), queue_shards=2)
    sessions = [f"telegram:{n}" for n in range(12)]
    moved = [s for s in sessions if store.keys.shard(s) == 0]
    assert moved, "some sessions are in the shard that moves"
    finished: Counter[str] = Counter()
    stored: list[str] = []
    producing = True

    async def produce() -> None:
        for n in range(40):
            for session in sessions:
                request = IntakeRequest(
                    session=session,
                    entry=InboxEntry(f"{session}-e{n}", "{}"),
                    seen=keys.seen("test", f"{session}-{n}"),
                    seen_ttl=60,
                    max_queued=1000,
                    max_total=100_000,
                )
                assert (await store.intake(request)).status == "stored"
                stored.append(request.entry.id)
            await asyncio.sleep(0.01)

    async def consume() -> None:
        while producing or (await store.inbox_stats())[0]:
            for claimed in await store.claim("w:1", 5, limit=8):
                turn: Claimed | None = claimed
                while turn is not None:
                    finished[turn.entry.id] += 1
                    done = await store.finish(
                        turn.session, turn.entry.id, turn.owner, Batch(), keep=True,
                        lease_ttl=5, token=turn.token,
                    )  # fmt: skip
                    turn = done.next
            await asyncio.sleep(0.005)

    consumer = asyncio.create_task(consume())
    try:
        producer = asyncio.create_task(produce())
        await asyncio.sleep(0.2)
        slot = key_slot(b"{q0}")
        source, target = await asyncio.to_thread(move_slot, servers, slot, 0.02)
        await producer
        producing = False
        await asyncio.wait_for(consumer, 60)
        assert servers.master_of_slot(slot).port == target != source
        assert len(stored) == 40 * len(sessions)
        assert sorted(finished) == sorted(stored)
        assert set(finished.values()) == {1}, "each message ran once"
        assert await store.inbox_stats() == (0, 0.0)
    finally:
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
        await store.close()
