"""What the Redis store's parts share: key names under the deployment's prefix, and turning
redis-py's network errors into StoreUnavailable without leaking the password."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import TracebackType
from urllib.parse import unquote

from redis.exceptions import ConnectionError as RedisConnectionError
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


def millis(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl must be positive, got {ttl}")
    return math.ceil(ttl * 1000)
