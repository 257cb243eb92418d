"""What the Redis store's parts share: key names under the deployment's prefix, scripts run
alone or in order, and turning network errors into StoreUnavailable without leaking the
password."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from gateway.store.base import StoreUnavailable
from gateway.store.redis_client import ReplyError, Script, Wire, is_no_script, load_scripts
from gateway.store.redis_topology import NETWORK_ERRORS as NETWORK_ERRORS


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
    """`with` block turning network errors (after the retries) into StoreUnavailable."""

    def __init__(self, where: str, secrets: tuple[str, ...]) -> None:
        self._where = where
        self._secrets = secrets

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
        for secret in self._secrets:
            detail = detail.replace(secret, "****")
        return f"Redis at {self._where} is unavailable ({detail}); check that it is running"


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """One run of a script, to send alone (`run`) or with others (`run_in_order`)."""

    script: Script
    keys: list[str]
    args: list[Any]

    def command(self) -> list[Any]:
        return self.script.command(self.keys, self.args)

    async def run(self, wire: Wire) -> Any:
        """Run it; when the server lacks the script (a restart), load it and run it again."""
        try:
            return await wire.call(*self.command())
        except ReplyError as exc:
            if not is_no_script(exc):
                raise
        await load_scripts(wire)
        return await wire.call(*self.command())


async def run_in_order(wire: Wire, calls: Sequence[ScriptCall]) -> list[Any]:
    """Run scripts one after another in one round trip; their results, in order.

    When the server lost its script cache (a restart), the scripts that failed are loaded
    and run again, in order; the others ran once, as sent.
    """
    results = await wire.many([call.command() for call in calls])
    for n, (call, result) in enumerate(zip(calls, results, strict=True)):
        if is_no_script(result):
            results[n] = await call.run(wire)
        elif isinstance(result, ReplyError):
            raise result
    return results


def millis(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl must be positive, got {ttl}")
    return math.ceil(ttl * 1000)
