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

from gateway.store.redis_refusals import refused, short_detail, tls_refusal, why_unreachable
from tests.fixtures_redis import free_port


async def test_sentinels_are_named_by_address_not_by_their_client() -> None:
    ports = [free_port(), free_port()]
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        [("127.0.0.1", p) for p in ports], sentinel_kwargs={"retry": Retry(NoBackoff(), 0)}
    )
    with pytest.raises(MasterNotFoundError) as failed:
        await sentinel.discover_master("mymaster")  # type: ignore[no-untyped-call]
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


async def test_a_handshake_cut_short_is_retried_as_an_outage() -> None:
    async with closing_at_once() as port:
        client = Redis(port=port, ssl=True, retry=Retry(NoBackoff(), 0), socket_timeout=2)
        try:
            with pytest.raises(RedisConnectionError) as failed:
                await client.ping()
        finally:
            await client.aclose()
    assert tls_refusal(failed.value) is None and not refused(failed.value)
    assert why_unreachable(failed.value) == "ConnectionError"
