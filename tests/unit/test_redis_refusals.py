"""Which Redis errors the store gives up on at once, and how it words them: redis-py's own
errors from real connections (the TLS refusals themselves are met on real TLS servers in
test_redis_tls_acl.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis, Sentinel
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.store.redis_protocol import probe_mismatch
from gateway.store.redis_refusals import refused, short_detail, tls_refusal, why_unreachable
from tests.fixtures_redis import free_port


async def test_sentinels_are_named_by_address_not_by_their_client() -> None:
    ports = [free_port(), free_port()]
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        [("127.0.0.1", p) for p in ports], sentinel_kwargs={"retry": Retry(NoBackoff(), 0)}
    )
    with pytest.raises(MasterNotFoundError) as failed:
        await sentinel.discover_master("mymaster")
    assert len(str(failed.value)) > 1000  # each client's repr, as redis-py words it
    detail = short_detail(failed.value)
    assert detail.startswith("No master found for 'mymaster'"), detail
    assert all(f"sentinel 127.0.0.1:{p} - " in detail for p in ports), detail
    assert "<redis" not in detail and len(detail) < 300, detail
    assert not refused(failed.value)


@contextlib.asynccontextmanager
async def closing_at_once() -> AsyncIterator[int]:
    """A server that takes the connection and closes it before any handshake: a node going
    down, not a setting."""

    async def close(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(close, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def failure(port: int, *, tls: bool) -> RedisConnectionError:
    """What one PING to 127.0.0.1:`port` fails with, sent once."""
    client = Redis(port=port, ssl=tls, retry=Retry(NoBackoff(), 0), socket_timeout=2)
    try:
        with pytest.raises(RedisConnectionError) as failed:
            await client.ping()
    finally:
        await client.aclose()
    return failed.value


async def test_a_handshake_cut_short_is_retried_as_an_outage() -> None:
    async with closing_at_once() as port:
        cut_short = await failure(port, tls=True)
    assert tls_refusal(cut_short) is None and not refused(cut_short)
    assert why_unreachable(cut_short) == "ConnectionError"


@contextlib.asynccontextmanager
async def answering(text: bytes, connections: list[int] | None = None) -> AsyncIterator[int]:
    """A server that is not Redis: it answers whatever comes with `text`, then closes (each
    connection counted in `connections`)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if connections is not None:
            connections.append(1)
        with contextlib.suppress(OSError):
            await reader.read(1)
            writer.write(text)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


async def test_a_port_that_is_neither_redis_nor_tls_is_not_named_the_other_protocol() -> None:
    """The probe after a failure looks for what Redis itself would answer: a service that
    closes, or answers HTTP, stays an outage (retried), whichever way it was spoken to."""
    async with closing_at_once() as port:
        closed = await failure(port, tls=False)
        assert await probe_mismatch(closed, "127.0.0.1", port, tls=False) is None
    async with answering(b"HTTP/1.1 400 Bad Request\r\n\r\n") as port:
        not_tls = await failure(port, tls=True)
        assert await probe_mismatch(not_tls, "127.0.0.1", port, tls=True) is None
    assert not refused(closed) and not refused(not_tls)


async def test_a_port_that_answers_as_redis_is_named_when_spoken_to_with_tls() -> None:
    """The same failure from a port that answers an inline PING the way Redis does."""
    async with answering(b"-NOAUTH Authentication required.\r\n") as port:
        not_tls = await failure(port, tls=True)
        mismatch = await probe_mismatch(not_tls, "127.0.0.1", port, tls=True)
    assert mismatch is not None and not mismatch.server_tls, not_tls
    assert (
        str(mismatch) == f"127.0.0.1:{port} does not speak TLS, and these settings connect with TLS"
    )
    assert refused(mismatch) and why_unreachable(mismatch) == "it does not speak TLS"


async def test_an_address_found_in_its_own_protocol_is_not_probed_again_for_a_while() -> None:
    """A TLS server that stops answering fails every retry with a timeout: one probe tells
    it is no plain server, and the retries after it within QUIET_SECONDS go unprobed."""
    connections: list[int] = []
    async with answering(b"HTTP/1.1 400 Bad Request\r\n\r\n", connections) as port:
        not_tls = await failure(port, tls=True)
        assert len(connections) == 1
        assert await probe_mismatch(not_tls, "127.0.0.1", port, tls=True) is None
        assert len(connections) == 2  # the probe
        assert await probe_mismatch(not_tls, "127.0.0.1", port, tls=True) is None
        assert len(connections) == 2  # not probed again
