"""WAIT on a real Redis Cluster (three masters, three replicas on 127.0.0.1): each master's
part of a batch that writes ends with WAIT on its own connection, callers see the replies
they would without it, a master whose replica is gone is not waited for again at once, and
writes whose WAIT lost its connection are sent again."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from redis.crc import key_slot

from gateway.store import keys, redis_replicas
from gateway.store.base import Batch
from gateway.store.redis import RedisStore
from gateway.store.redis_client import RedisCommands
from gateway.store.redis_topology import open_client
from tests.fixtures_redis_ha import RedisClusterSet

pytestmark = pytest.mark.redis


def waits(servers: RedisClusterSet, port: int) -> int:
    """WAIT commands the node on `port` has run."""
    client = servers.client(port)
    try:
        stats: dict[str, Any] = client.info("commandstats")
        return int(stats.get("cmdstat_wait", {}).get("calls", 0))
    finally:
        client.close()


def master_port(servers: RedisClusterSet, key: str) -> int:
    return servers.master_of_slot(key_slot(key.encode())).port


def wire_for(servers: RedisClusterSet, *, replicas: int) -> RedisCommands:
    client = open_client(
        servers.target(),
        max_connections=8,
        socket_timeout=5.0,
        retries=3,
        per_reply_timeout=False,
        cluster_replicas=replicas,
    )
    return RedisCommands(client, deadline=20.0)


@pytest_asyncio.fixture
async def waiting(redis_cluster: RedisClusterSet) -> AsyncIterator[RedisCommands]:
    wire = wire_for(redis_cluster, replicas=1)
    yield wire
    await wire.close()


async def test_each_master_a_store_batch_writes_to_waits_for_a_replica(
    redis_cluster: RedisClusterSet,
) -> None:
    store = RedisStore(key_prefix=f"wait-{uuid.uuid4().hex[:8]}", target=redis_cluster.target())
    try:
        sessions = [f"telegram:{n}" for n in range(24)]
        names = [store.keys.data(keys.session(s)) for s in sessions]
        written = {master_port(redis_cluster, n) for n in names}
        assert len(written) == 3  # the batch spreads over every master
        before = {port: waits(redis_cluster, port) for port in written}
        batch = Batch()
        for session in sessions:
            batch.set(keys.session(session), "{}")
        await store.run(batch)
        after = {port: waits(redis_cluster, port) for port in written}
        assert all(after[port] > before[port] for port in written), (before, after)
        read = Batch()
        for session in sessions:
            read.get(keys.session(session))
        assert await store.run(read) == ["{}"] * len(sessions)
    finally:
        await store.close()


async def test_callers_get_the_replies_they_would_without_wait(
    redis_cluster: RedisClusterSet, waiting: RedisCommands
) -> None:
    plain = wire_for(redis_cluster, replicas=0)
    try:
        replies: list[list[Any]] = []
        for wire in (waiting, plain):
            tag = uuid.uuid4().hex[:8]
            a, b, c = (f"{tag}:{label}" for label in "abc")
            assert len({master_port(redis_cluster, k) for k in (a, b, c)}) > 1
            got = await wire.many(
                [
                    ["SET", a, "1"],
                    ["INCR", b],
                    ["HSET", a, "f", "v"],  # WRONGTYPE: an error reply, in its place
                    ["RPUSH", c, "x", "y"],
                    ["GET", a],
                    ["LRANGE", c, 0, -1],
                    ["GET", f"{tag}:missing"],
                ]
            )
            replies.append([(type(r).__name__, str(r)) for r in got])
            assert await wire.call("INCRBY", b, 2) == 3
        assert replies[0] == replies[1]
        assert replies[0][2][0] == "ResponseError"
    finally:
        await plain.close()


async def test_reads_do_not_wait(redis_cluster: RedisClusterSet, waiting: RedisCommands) -> None:
    tag = uuid.uuid4().hex[:8]
    spread = [f"{tag}:{n}" for n in range(12)]
    ports = {master_port(redis_cluster, k) for k in spread}
    before = {port: waits(redis_cluster, port) for port in ports}
    assert await waiting.many([["GET", k] for k in spread]) == [None] * len(spread)
    assert {port: waits(redis_cluster, port) for port in ports} == before


async def test_a_master_without_its_replica_is_not_waited_for_again_at_once(
    own_redis_cluster: RedisClusterSet,
) -> None:
    servers = own_redis_cluster
    wire = wire_for(servers, replicas=1)
    try:
        tag = uuid.uuid4().hex[:8]
        alone, other = (
            f"{tag}:alone",
            next(
                f"{tag}:other{n}"
                for n in range(100)
                if master_port(servers, f"{tag}:other{n}") != master_port(servers, f"{tag}:alone")
            ),
        )
        lonely, busy = master_port(servers, alone), master_port(servers, other)
        batch = [["SET", alone, "1"], ["SET", other, "1"]]

        assert await wire.many(batch) == ["OK", "OK"]
        assert (waits(servers, lonely), waits(servers, busy)) == (1, 1)

        replication: dict[str, Any] = servers.client(lonely).info("replication")
        servers.server_on(int(replication["slave0"]["port"])).kill()
        # The first batch after waits out WAIT's timeout and finds no replica confirming...
        assert await wire.many(batch) == ["OK", "OK"]
        assert (waits(servers, lonely), waits(servers, busy)) == (2, 2)
        # ...so the next ones do not wait for that master (the others still do).
        assert await wire.many(batch) == ["OK", "OK"]
        assert await wire.many(batch) == ["OK", "OK"]
        assert (waits(servers, lonely), waits(servers, busy)) == (2, 4)
    finally:
        await wire.close()


async def test_writes_whose_wait_lost_its_connection_are_sent_again(
    own_redis_cluster: RedisClusterSet, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A master that goes away while WAIT waits may take the writes along: the caller is not
    # told they are stored; they go again, and the caller hears from the second WAIT.
    servers = own_redis_cluster
    monkeypatch.setattr(redis_replicas, "WAIT_MS", 30_000)  # WAIT blocks till the kill
    wire = wire_for(servers, replicas=1)
    key = f"{uuid.uuid4().hex[:8]}:count"
    port = master_port(servers, key)
    master = servers.client(port)
    replica = servers.server_on(int(master.info("replication")["slave0"]["port"]))
    # The client learns the slots before the replica stops: asked first, a stopped node
    # would hold its start past the deadline.
    await wire.client.initialize()
    try:
        os.kill(replica.pid, signal.SIGSTOP)
        sent = asyncio.create_task(wire.many([["INCR", key]]))
        while int(master.info("clients")["blocked_clients"]) == 0:  # WAIT is waiting
            assert not sent.done()
            await asyncio.sleep(0.05)
        master.client_kill_filter(_type="normal")  # not this connection (SKIPME)
        os.kill(replica.pid, signal.SIGCONT)
        # The INCR ran twice (its first reply was read before WAIT's connection broke).
        assert await sent == [2]
        stats: dict[str, Any] = master.info("commandstats")
        assert stats["cmdstat_incr"]["calls"] == 2
        assert stats["cmdstat_wait"]["calls"] == 2
    finally:
        os.kill(replica.pid, signal.SIGCONT)
        master.close()
        await wire.close()
