"""The Redis store behind Sentinel, on a real Sentinel set (a master, a replica and three
sentinels on 127.0.0.1): it follows a failover, its writes are on the replica when they are
acknowledged, and `chatgate doctor` shows the topology."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from gateway.app.app import load_settings
from gateway.app.doctor import run_checks
from gateway.store.base import StoreUnavailable
from gateway.store.redis import RedisStore
from gateway.store.redis_topology import describe_topology
from tests.fixtures_redis import silent_server
from tests.fixtures_redis_ha import MASTER_NAME, SentinelSet

pytestmark = pytest.mark.redis


async def test_the_store_follows_a_failover_on_the_connection_it_had(
    own_sentinel_set: SentinelSet,
) -> None:
    servers = own_sentinel_set
    # One connection: after the failover it is the same connection object that reconnects,
    # and it must reconnect to the new master, not to the address it had.
    store = RedisStore(key_prefix="follow", max_connections=1, target=servers.target())
    try:
        assert await store.set("before", "1")
        old = servers.master_port()
        servers.server_on(old).kill()
        # Sent while the sentinels have not yet noticed: the write retries through the
        # failover, reconnecting to whichever master the sentinels name at each attempt.
        assert await store.set("after", "2")
        assert servers.master_port() != old
        assert await store.get("before") == "1"  # it was on the replica before the kill
        new = servers.master_port()
        check = redis.Redis(port=new, decode_responses=True)
        assert check.get("follow:k:after") == "2"
        check.close()
    finally:
        await store.close()


async def test_an_acknowledged_write_is_already_on_the_replica(sentinel_set: SentinelSet) -> None:
    store = RedisStore(key_prefix=f"wait-{uuid.uuid4().hex[:8]}", target=sentinel_set.target())
    replica = redis.Redis(port=sentinel_set.replica_port(), decode_responses=True)
    try:
        for n in range(50):
            await store.set(f"k{n}", str(n))
            # Read from the replica at once: the store's reply came after WAIT.
            assert replica.get(store.keys.data(f"k{n}")) == str(n)
    finally:
        replica.close()
        await store.close()


async def test_a_sentinel_that_never_answers_does_not_hold_up_the_others(
    sentinel_set: SentinelSet,
) -> None:
    """The sentinels are asked at once: one whose host has gone quiet (listed first here)
    does not cost its timeout, which redis-py's one-after-another lookup waited through on
    every reconnect that found it first."""
    server, port = await silent_server()
    silent = f"127.0.0.1:{port}"
    target = replace(sentinel_set.target(), sentinels=(silent, *sentinel_set.addresses))
    store = RedisStore(key_prefix=f"quiet-{uuid.uuid4().hex[:8]}", target=target, socket_timeout=60)
    try:
        # Well inside the 60 s a reply from the silent sentinel is waited for.
        assert await asyncio.wait_for(store.set("k", "v"), 15)
        assert await asyncio.wait_for(store.get("k"), 15) == "v"
    finally:
        await store.close()
        server.close()


async def test_a_healthy_first_sentinel_is_the_only_one_asked(sentinel_set: SentinelSet) -> None:
    """The next sentinel is asked only when the ones before fail, name no healthy master or
    are slow: a lookup does not cost every sentinel a connection."""
    watch = [sentinel.client() for sentinel in sentinel_set.sentinels]

    def connections() -> list[int]:
        return [int(client.info("stats")["total_connections_received"]) for client in watch]

    try:
        before = connections()
        for _ in range(40):  # until the sentinels have made their links to each other
            await asyncio.sleep(0.5)
            now, before = before, connections()
            if now == before:
                break
        store = RedisStore(key_prefix=f"first-{uuid.uuid4().hex[:8]}", target=sentinel_set.target())
        try:
            assert await store.set("k", "v")
        finally:
            await store.close()
        after = connections()
        assert after[0] > before[0] and after[1:] == before[1:], (before, after)
    finally:
        for client in watch:
            client.close()


async def test_doctor_shows_master_replica_and_sentinels(
    sentinel_set: SentinelSet, tmp_path: Path
) -> None:
    described = await describe_topology(sentinel_set.target())
    master = sentinel_set.master_port()
    assert described.startswith(f"sentinel master {MASTER_NAME}: master 127.0.0.1:{master} ")
    assert "replica 127.0.0.1:" in described and described.count("sentinel 127.0.0.1:") == 3
    assert " ms" in described and "unreachable" not in described
    settings = load_settings(
        None,
        data_dir=str(tmp_path),
        redis={"sentinels": sentinel_set.addresses, "sentinel_master": MASTER_NAME},
    )
    results = {r.name: r for r in await run_checks(settings)}
    assert results["store"].ok and f"master 127.0.0.1:{master}" in results["store"].detail


async def test_sentinel_with_a_password_and_an_acl_user(tmp_path: Path) -> None:
    servers = SentinelSet(tmp_path, password="s3cret-pw")
    servers.start()
    try:
        target = servers.target()
        store = RedisStore(key_prefix="acl", target=replace(target, username="default"))
        wrong = RedisStore(key_prefix="acl", retries=0, target=replace(target, password="nope-pw"))
        try:
            assert await store.set("k", "v")
            assert await store.get("k") == "v"
            with pytest.raises(StoreUnavailable) as caught:
                await wrong.get("k")
            assert "nope-pw" not in str(caught.value) and "s3cret-pw" not in str(caught.value)
        finally:
            await store.close()
            await wrong.close()
    finally:
        servers.stop()
