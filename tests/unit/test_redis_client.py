"""RedisCommands, the store's batching of commands on redis-py (gateway/store/redis_client.py),
against real redis-servers, and against servers on 127.0.0.1 that never answer."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import redis
from redis.exceptions import AuthenticationError, NoScriptError, ResponseError

from gateway.store.base import StoreUnavailable
from gateway.store.redis import RedisStore
from gateway.store.redis_client import RedisCommands, Script, is_no_script
from gateway.store.redis_topology import NETWORK_ERRORS, RedisTarget, open_client
from tests.certs import self_signed
from tests.fixtures_redis import RedisServer, silent_server

pytestmark = pytest.mark.redis


def commands_for(url: str, *, timeout: float = 5.0, retries: int = 0) -> RedisCommands:
    client = open_client(
        RedisTarget(url=url),
        max_connections=16,
        socket_timeout=timeout,
        retries=retries,
        per_reply_timeout=False,
    )
    return RedisCommands(client, batches=2, deadline=timeout)


@pytest_asyncio.fixture
async def wire(redis_url: str) -> AsyncIterator[RedisCommands]:
    client = commands_for(redis_url)
    yield client
    await client.close()


def name(label: str) -> str:
    return f"client-{uuid.uuid4().hex[:10]}:{label}"


def connected_clients(url: str) -> int:
    check = redis.Redis.from_url(url)
    try:
        return int(check.info("clients")["connected_clients"])
    finally:
        check.close()


async def test_many_callers_at_once_each_get_their_own_replies(
    wire: RedisCommands, redis_url: str
) -> None:
    prefix = name("caller")
    before = connected_clients(redis_url)

    async def caller(n: int) -> tuple[str, list[object]]:
        await wire.call("SET", f"{prefix}:{n}", f"value {n}")
        own = await wire.call("GET", f"{prefix}:{n}")
        batch = await wire.many([("INCRBY", f"{prefix}:count:{n}", n), ("GET", f"{prefix}:{n}")])
        return own, batch

    results = await asyncio.gather(*(caller(n) for n in range(600)))
    for n, (own, batch) in enumerate(results):
        assert own == f"value {n}"
        assert batch == [n, f"value {n}"]
    # 600 callers went in batches, on no more connections than batches in flight.
    assert connected_clients(redis_url) - before <= 2


async def test_error_replies_raise_alone_and_stay_in_place_in_a_batch(
    wire: RedisCommands,
) -> None:
    text = name("text")
    await wire.call("SET", text, "not a number")
    with pytest.raises(ResponseError, match="not an integer"):
        await wire.call("INCR", text)
    counter = name("counter")
    first, failed, last = await wire.many([("INCR", counter), ("INCR", text), ("INCR", counter)])
    assert (first, last) == (1, 2)
    assert isinstance(failed, ResponseError) and "not an integer" in str(failed)
    # A caller's error does not touch the others' replies in the same pipeline.
    mixed = await asyncio.gather(
        wire.call("INCR", text), wire.call("GET", text), return_exceptions=True
    )
    assert isinstance(mixed[0], ResponseError) and mixed[1] == "not a number"


async def test_a_missing_script_is_a_no_script_reply(wire: RedisCommands) -> None:
    script = Script(f"return '{uuid.uuid4().hex}'")
    with pytest.raises(NoScriptError) as caught:
        await wire.call(*script.command([], []))
    assert is_no_script(caught.value)
    [in_batch] = await wire.many([script.command([], [])])
    assert is_no_script(in_batch)
    await wire.call("SCRIPT", "LOAD", script.source)
    assert await wire.call(*script.command([], [])) == script.source.split("'")[1]


async def test_replies_come_unshaped_as_redis_sends_them(wire: RedisCommands) -> None:
    key = name("hash")
    await wire.call("HSET", key, "a", "1", "b", "2")
    assert sorted(await wire.call("HGETALL", key)) == ["1", "2", "a", "b"]
    assert await wire.call("SET", name("x"), "1", "NX") == "OK"


async def test_a_caller_that_gave_up_does_not_shift_the_replies(wire: RedisCommands) -> None:
    first, second = name("first"), name("second")
    await wire.many([("SET", first, "1"), ("SET", second, "2")])
    for _ in range(50):
        abandoned = asyncio.create_task(wire.call("GET", first))
        await asyncio.sleep(0)  # queued, not answered yet
        abandoned.cancel()
        assert await wire.call("GET", second) == "2"


async def test_big_values_come_back_whole(wire: RedisCommands) -> None:
    key = name("big")
    value = "é" * 3_000_000  # 6 MB on the wire, read in many pieces
    await wire.call("SET", key, value)
    small = asyncio.create_task(wire.call("ECHO", "behind the big one"))
    assert await wire.call("GET", key) == value
    assert await small == "behind the big one"
    await wire.call("DEL", key)


async def test_password_and_database_from_the_url(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, password="s3cret-pw")
    server.start()
    wire = commands_for(f"redis://:s3cret-pw@127.0.0.1:{server.port}/3")
    wrong = commands_for(f"redis://:wrong-pw@127.0.0.1:{server.port}/3")
    try:
        await wire.call("SET", "where", "db 3")
        check = redis.Redis(port=server.port, password="s3cret-pw", db=3, decode_responses=True)
        assert check.get("where") == "db 3"
        check.close()
        with pytest.raises(AuthenticationError) as caught:
            await wrong.call("PING")
        assert "wrong-pw" not in str(caught.value)
    finally:
        await wire.close()
        await wrong.close()
        server.stop()


async def test_a_unix_socket(tmp_path: Path) -> None:
    socket_path = tmp_path / "redis.sock"
    server = RedisServer(tmp_path, unix_socket=socket_path)
    server.start()
    wire = commands_for(f"unix://{socket_path}?db=2")
    try:
        await wire.call("SET", "over", "the socket")
        check = redis.Redis(port=server.port, db=2, decode_responses=True)
        assert check.get("over") == "the socket"
        check.close()
    finally:
        await wire.close()
        server.stop()


async def test_a_server_that_stops_answering_fails_every_waiting_command() -> None:
    server, port = await silent_server()
    wire = commands_for(f"redis://127.0.0.1:{port}/0", timeout=0.3)
    try:
        started = time.monotonic()
        results = await asyncio.gather(
            *(wire.call("GET", f"k{n}") for n in range(20)), return_exceptions=True
        )
        assert all(isinstance(r, NETWORK_ERRORS) for r in results), results
        assert time.monotonic() - started < 3
    finally:
        await wire.close()
        server.close()


async def test_a_store_on_a_silent_server_is_unavailable_not_hung() -> None:
    server, port = await silent_server()
    store = RedisStore(f"redis://127.0.0.1:{port}/0", retries=1, socket_timeout=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}"):
            await store.get("k")
        assert time.monotonic() - started < 3
    finally:
        await store.close()
        server.close()


async def test_tls_with_the_servers_certificate_checked(tmp_path: Path) -> None:
    cert, key = await asyncio.to_thread(self_signed, tmp_path)
    server = RedisServer(tmp_path, tls=(cert, key))
    server.start()
    base = f"rediss://127.0.0.1:{server.port}/0"
    trusted = commands_for(f"{base}?ssl_ca_certs={cert}")
    untrusted = commands_for(base)  # the system's CAs do not know this certificate
    unchecked = commands_for(f"{base}?ssl_cert_reqs=none")
    try:
        assert await trusted.call("SET", "over", "tls") == "OK"
        assert await trusted.call("GET", "over") == "tls"
        with pytest.raises(NETWORK_ERRORS, match=r"(?i)certificate"):
            await untrusted.call("PING")
        assert await unchecked.call("GET", "over") == "tls"
    finally:
        for wire in (trusted, untrusted, unchecked):
            await wire.close()
        server.stop()


async def test_doctor_describes_one_server(redis_url: str) -> None:
    from gateway.store.redis_topology import describe_topology

    described = await describe_topology(RedisTarget(url=redis_url))
    assert described.startswith(f"single {redis_url}: master, ")
    assert described.endswith("ms, 0 replica(s)")
