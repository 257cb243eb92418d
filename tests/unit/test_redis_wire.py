"""RedisWire, the store's Redis client (gateway/store/redis_wire.py), against real
redis-servers, and against servers on 127.0.0.1 that never answer or answer garbage."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import redis

from gateway.store.base import StoreUnavailable
from gateway.store.redis import RedisStore
from gateway.store.redis_wire import RedisWire, ReplyError, Script, WireError
from tests.fixtures_redis import RedisServer

pytestmark = pytest.mark.redis


@pytest_asyncio.fixture
async def wire(redis_url: str) -> AsyncIterator[RedisWire]:
    client = RedisWire(redis_url, connections=2)
    yield client
    await client.close()


def name(label: str) -> str:
    return f"wire-{uuid.uuid4().hex[:10]}:{label}"


async def test_many_callers_at_once_each_get_their_own_replies(wire: RedisWire) -> None:
    prefix = name("caller")

    async def caller(n: int) -> tuple[str, list[object]]:
        await wire.call("SET", f"{prefix}:{n}", f"value {n}")
        own = await wire.call("GET", f"{prefix}:{n}")
        batch = await wire.many([("INCRBY", f"{prefix}:count:{n}", n), ("GET", f"{prefix}:{n}")])
        return own, batch

    results = await asyncio.gather(*(caller(n) for n in range(600)))
    for n, (own, batch) in enumerate(results):
        assert own == f"value {n}"
        assert batch == [n, f"value {n}"]


async def test_error_replies_raise_alone_and_stay_in_place_in_a_batch(wire: RedisWire) -> None:
    text = name("text")
    await wire.call("SET", text, "not a number")
    with pytest.raises(ReplyError, match="not an integer"):
        await wire.call("INCR", text)
    counter = name("counter")
    first, failed, last = await wire.many([("INCR", counter), ("INCR", text), ("INCR", counter)])
    assert (first, last) == (1, 2)
    assert isinstance(failed, ReplyError) and "not an integer" in str(failed)
    # The connection is still in step after the errors.
    assert await wire.call("GET", text) == "not a number"


async def test_a_transaction_runs_all_or_nothing(wire: RedisWire) -> None:
    key = name("list")
    assert await wire.many(
        [("RPUSH", key, "a", "b", "c"), ("LTRIM", key, -2, -1)], transaction=True
    ) == [3, "OK"]
    assert await wire.call("LRANGE", key, 0, -1) == ["b", "c"]
    with pytest.raises(ReplyError, match="unknown command"):
        await wire.many([("RPUSH", key, "d"), ("NO-SUCH-COMMAND",)], transaction=True)
    assert await wire.call("LRANGE", key, 0, -1) == ["b", "c"]  # nothing of it ran


async def test_a_missing_script_is_a_no_script_reply(wire: RedisWire) -> None:
    script = Script(f"return '{uuid.uuid4().hex}'")
    with pytest.raises(ReplyError) as caught:
        await wire.call(*script.command([], []))
    assert caught.value.no_script
    await wire.call("SCRIPT", "LOAD", script.source)
    assert await wire.call(*script.command([], [])) == script.source.split("'")[1]


async def test_a_caller_that_gave_up_does_not_shift_the_replies(wire: RedisWire) -> None:
    first, second = name("first"), name("second")
    await wire.many([("SET", first, "1"), ("SET", second, "2")])
    for _ in range(50):
        abandoned = asyncio.create_task(wire.call("GET", first))
        await asyncio.sleep(0)  # written, not answered yet
        abandoned.cancel()
        assert await wire.call("GET", second) == "2"


async def test_big_values_come_back_whole(wire: RedisWire) -> None:
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
    wire = RedisWire(f"redis://:s3cret-pw@127.0.0.1:{server.port}/3", retries=0)
    wrong = RedisWire(f"redis://:wrong-pw@127.0.0.1:{server.port}/3", retries=0)
    try:
        await wire.call("SET", "where", "db 3")
        check = redis.Redis(port=server.port, password="s3cret-pw", db=3, decode_responses=True)
        assert check.get("where") == "db 3"
        check.close()
        with pytest.raises(WireError) as caught:
            await wrong.call("PING")
        assert "refused" in str(caught.value)
        assert "wrong-pw" not in str(caught.value)
    finally:
        await wire.close()
        await wrong.close()
        server.stop()


async def test_a_unix_socket(tmp_path: Path) -> None:
    socket_path = tmp_path / "redis.sock"
    server = RedisServer(tmp_path, unix_socket=socket_path)
    server.start()
    wire = RedisWire(f"unix://{socket_path}?db=2")
    try:
        await wire.call("SET", "over", "the socket")
        check = redis.Redis(port=server.port, db=2, decode_responses=True)
        assert check.get("over") == "the socket"
        check.close()
    finally:
        await wire.close()
        server.stop()


async def start_server(reply: bytes | None) -> tuple[asyncio.Server, int]:
    """A server on 127.0.0.1 that reads commands and sends `reply` to each (None: nothing)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.read(65536):
            if reply is not None:
                writer.write(reply)
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_a_server_that_stops_answering_fails_every_waiting_command() -> None:
    server, port = await start_server(None)
    wire = RedisWire(f"redis://127.0.0.1:{port}/0", timeout=0.3, retries=0)
    try:
        started = time.monotonic()
        results = await asyncio.gather(
            *(wire.call("GET", f"k{n}") for n in range(20)), return_exceptions=True
        )
        assert all(isinstance(r, WireError) for r in results)
        assert "no reply within 0.3 s" in str(results[0])
        assert time.monotonic() - started < 2
    finally:
        await wire.close()
        server.close()


async def test_an_unreadable_reply_drops_the_connection() -> None:
    server, port = await start_server(b"!garbage\r\n")
    wire = RedisWire(f"redis://127.0.0.1:{port}/0", timeout=1, retries=0)
    try:
        with pytest.raises(WireError, match="unreadable reply"):
            await wire.call("PING")
    finally:
        await wire.close()
        server.close()


async def test_a_store_on_a_silent_server_is_unavailable_not_hung() -> None:
    server, port = await start_server(None)
    store = RedisStore(f"redis://127.0.0.1:{port}/0", retries=1, socket_timeout=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=f"127.0.0.1:{port}"):
            await store.get("k")
        assert time.monotonic() - started < 3
    finally:
        await store.close()
        server.close()


async def test_a_closed_wire_refuses_calls(redis_url: str) -> None:
    wire = RedisWire(redis_url)
    assert await wire.call("PING") == "PONG"
    await wire.close()
    with pytest.raises(WireError, match="closed"):
        await wire.call("PING")


async def test_tcp_connections_are_kept_alive(wire: RedisWire) -> None:
    """A peer gone silently (a NAT that dropped an idle connection) is noticed by TCP
    keepalive, not only at the next command's timeout."""
    import socket

    await wire.many([("PING",), ("PING",)])
    await wire.call("PING")
    opened = [c for c in wire._open if c is not None]
    assert opened
    for connection in opened:
        assert connection._transport is not None
        sock = connection._transport.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30


async def test_scripts_are_loaded_on_every_new_connection(redis_server: RedisServer) -> None:
    """A burst right after Redis (re)started must not get NOSCRIPT for every script call."""
    script = Script(f"return 'loaded {uuid.uuid4().hex}'")
    wire = RedisWire(redis_server.url, connections=1, retries=2, scripts=[script])
    try:
        assert (await wire.call(*script.command([], []))).startswith("loaded")
        redis_server.stop()
        redis_server.start()  # an empty script cache
        results = await wire.many([script.command([], []) for _ in range(100)])
        assert all(r == results[0] and r.startswith("loaded") for r in results)
    finally:
        await wire.close()


def self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_tls_with_the_servers_certificate_checked(tmp_path: Path) -> None:
    cert, key = await asyncio.to_thread(self_signed, tmp_path)
    server = RedisServer(tmp_path, tls=(cert, key))
    server.start()
    base = f"rediss://127.0.0.1:{server.port}/0"
    trusted = RedisWire(f"{base}?ssl_ca_certs={cert}", retries=0)
    untrusted = RedisWire(base, retries=0)  # the system's CAs do not know this certificate
    unchecked = RedisWire(f"{base}?ssl_cert_reqs=none", retries=0)
    try:
        assert await trusted.call("SET", "over", "tls") == "OK"
        assert await trusted.call("GET", "over") == "tls"
        with pytest.raises(WireError, match=r"(?i)certificate"):
            await untrusted.call("PING")
        assert await unchecked.call("GET", "over") == "tls"
    finally:
        for wire in (trusted, untrusted, unchecked):
            await wire.close()
        server.stop()
