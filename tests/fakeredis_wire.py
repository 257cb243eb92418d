"""The Redis store over fakeredis, for tests that want Redis semantics without a server: the
store's command wire over a redis-py client (fakeredis.FakeAsyncRedis)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from gateway.store.redis import RedisStore
from gateway.store.redis_client import Command


class ClientWire:
    """The store's Wire calls over a redis-py client the caller owns."""

    def __init__(self, client: Redis) -> None:
        # A client of our own on the caller's pool, without redis-py's reply shaping, so
        # replies come as Redis sends them, as from RedisCommands.
        self._raw = Redis(connection_pool=client.connection_pool)
        self._raw.response_callbacks = {}

    async def call(self, *command: str | int | float | bytes) -> Any:
        reply = await self._raw.execute_command(*command)  # type: ignore[no-untyped-call]
        return _as_sent(command, reply)

    async def many(self, commands: Sequence[Command]) -> list[Any]:
        async with self._raw.pipeline(transaction=False) as pipe:
            for command in commands:
                pipe.execute_command(*command)
            replies: list[Any] = await pipe.execute(raise_on_error=False)
        return [
            r if isinstance(r, ResponseError) else _as_sent(c, r)
            for c, r in zip(commands, replies, strict=True)
        ]

    async def close(self) -> None:
        return None  # the caller's client, the caller's to close


def store_over(client: Redis, *, key_prefix: str = "chatgate") -> RedisStore:
    """A RedisStore over `client` (which must decode responses); closing it leaves the client
    open."""
    kwargs: dict[str, Any] = client.get_connection_kwargs()  # type: ignore[no-untyped-call]
    if not kwargs.get("decode_responses"):
        raise ValueError("the store needs a client with decode_responses=True")
    return RedisStore.over(
        ClientWire(client),
        client,
        key_prefix=key_prefix,
        where=f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}",
        password=kwargs.get("password"),
    )


def _as_sent(command: Command, reply: Any) -> Any:
    """A reply in the shape Redis sends it (RESP2): fakeredis shapes HGETALL as a dict and
    WITHSCORES as [member, score] pairs even with redis-py's shaping off."""
    if isinstance(reply, dict):
        return [item for pair in reply.items() for item in pair]
    if "WITHSCORES" in command and isinstance(reply, list):
        return [str(item) for pair in reply for item in pair]
    return reply
