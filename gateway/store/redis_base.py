"""What the Redis store's parts share: key names under the deployment's prefix, and turning
redis-py's network errors into StoreUnavailable without leaking the password."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import unquote

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.store.base import StoreUnavailable

NETWORK_ERRORS = (RedisConnectionError, RedisTimeoutError)


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """Builds every Redis name the store uses (see the module docstring)."""

    prefix: str

    def data(self, key: str) -> str:
        return f"{self.prefix}:k:{key}"

    def lease(self, name: str) -> str:
        return f"{self.prefix}:lease:{name}"

    def channel(self, name: str) -> str:
        return f"{self.prefix}:ch:{name}"


class Unavailable:
    """`with` block turning redis-py's network errors (after its retries) into StoreUnavailable."""

    def __init__(self, where: str, password: str | None) -> None:
        self._where = where
        self._password = password

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, NETWORK_ERRORS):
            raise StoreUnavailable(self.describe(exc)) from exc

    def describe(self, exc: BaseException) -> str:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if self._password:
            for secret in {self._password, unquote(self._password)}:
                detail = detail.replace(secret, "****")
        return f"Redis at {self._where} is unavailable ({detail}); check that it is running"


def evalsha(pipe: Pipeline, script: AsyncScript, keys: list[str], args: list[Any]) -> None:
    """Queue a script run in a pipeline as plain EVALSHA: `script(client=pipe)` sends SCRIPT
    EXISTS first on every pipeline, a second round trip. A missing script (NoScriptError in
    the results) is the caller's to handle."""
    pipe.evalsha(script.sha, len(keys), *keys, *args)


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """One run of a registered script, to send alone (`run`) or with others (`run_in_order`)."""

    script: AsyncScript
    keys: list[str]
    args: list[Any]

    async def run(self) -> Any:
        return await self.script(keys=self.keys, args=self.args)


async def run_in_order(client: Redis, calls: Sequence[ScriptCall]) -> list[Any]:
    """Run scripts one after another in one round trip; their results, in order.

    When the server lost its script cache (a restart), the scripts that failed are loaded
    and run again, in order; the others ran once, as sent.
    """
    async with client.pipeline(transaction=False) as pipe:
        for call in calls:
            evalsha(pipe, call.script, call.keys, call.args)
        results: list[Any] = await pipe.execute(raise_on_error=False)
    for n, (call, result) in enumerate(zip(calls, results, strict=True)):
        if isinstance(result, NoScriptError):
            await client.script_load(call.script.script)
            results[n] = await call.run()
        elif isinstance(result, Exception):
            raise result
    return results


def millis(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl must be positive, got {ttl}")
    return math.ceil(ttl * 1000)
