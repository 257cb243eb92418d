"""What the Redis store's parts share: key names under the deployment's prefix, scripts run
alone or in order, and turning network errors into StoreUnavailable without leaking the
password."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from gateway.store import keys
from gateway.store.base import StoreRefused, StoreUnavailable
from gateway.store.redis_client import ReplyError, Script, Wire, is_no_script, load_scripts
from gateway.store.redis_protocol import wrong_protocol
from gateway.store.redis_refusals import (
    refused,
    refused_login,
    short_detail,
    tls_problem,
    tls_refusal,
)
from gateway.store.redis_topology import NETWORK_ERRORS as NETWORK_ERRORS
from gateway.store.redis_topology import RedisTarget

# Logical keys that name a session after these prefixes; on Redis Cluster they live in the
# session's queue shard, with the inbox scripts that read and write them.
_SESSION_BOUND = (keys.PENDING_PREFIX, keys.SESSION_PREFIX, keys.FENCE_PREFIX)
_SEARCH = "search:"


def queue_shard(session: str, shards: int) -> int:
    """The queue shard of a session: stable across processes and versions (CRC-32)."""
    return zlib.crc32(session.encode()) % shards


@dataclass(frozen=True, slots=True)
class RedisKeys:
    """Builds every Redis name the store uses (see gateway/store/redis.py's docstring).

    With `shards` (Redis Cluster), the names a script touches together share a hash tag:
    a session's inbox keys, its lease, its history record and fence, and the ready set,
    attempts and total of its queue shard carry the shard's tag `{qN}`; the search index
    carries `{search}`. Other keys go where Redis hashes them, one key per command. Without
    shards (one server, Sentinel) names carry no tag."""

    prefix: str
    shards: int = 0

    @property
    def cluster(self) -> bool:
        return self.shards > 0

    def shard(self, session: str) -> int | None:
        """The session's queue shard; None without shards (one shard, untagged)."""
        return queue_shard(session, self.shards) if self.shards else None

    def data(self, key: str) -> str:
        if self.shards:
            if key.startswith(_SEARCH):
                return f"{self.prefix}:{{search}}:k:{key}"
            if key != keys.PENDING_TOTAL:
                for bound in _SESSION_BOUND:
                    if key.startswith(bound):
                        return self.at(self.shard(key[len(bound) :]), key)
        return f"{self.prefix}:k:{key}"

    def at(self, shard: int | None, key: str) -> str:
        """`key` in queue shard `shard` (None: the plain name)."""
        if shard is None:
            return f"{self.prefix}:k:{key}"
        return f"{self.prefix}:{{q{shard}}}:k:{key}"

    def near(self, session: str, key: str) -> str:
        """`key`, which belongs to `session` (a reply slot, a dedupe mark), in its shard."""
        return self.at(self.shard(session), key)

    def lease(self, name: str) -> str:
        if self.shards and name.startswith(keys.SESSION_LEASE_PREFIX):
            return self.lease_at(self.shard(name[len(keys.SESSION_LEASE_PREFIX) :]), name)
        return f"{self.prefix}:lease:{name}"

    def lease_at(self, shard: int | None, name: str) -> str:
        if shard is None:
            return f"{self.prefix}:lease:{name}"
        return f"{self.prefix}:{{q{shard}}}:lease:{name}"

    def same_slot(self, name: str, session: str) -> bool:
        """`name` is in `session`'s shard (always, without shards)."""
        return not self.shards or name.startswith(f"{self.prefix}:{{q{self.shard(session)}}}:")

    def channel(self, name: str) -> str:
        return f"{self.prefix}:ch:{name}"


class Unavailable:
    """`with` block turning network errors (after the retries) into StoreUnavailable."""

    def __init__(
        self, where: str, secrets: tuple[str, ...], target: RedisTarget | None = None
    ) -> None:
        self._where = where
        self._secrets = secrets
        self._target = target  # names the settings to fix when a login or TLS is refused

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if isinstance(exc, NETWORK_ERRORS):
            failed = StoreRefused if refused(exc) else StoreUnavailable
            raise failed(self.describe(exc)) from exc

    def describe(self, exc: BaseException) -> str:
        login, tls = refused_login(exc), tls_refusal(exc)
        detail = " ".join(login[1].split()) if login else short_detail(exc)
        for secret in self._secrets:
            detail = detail.replace(secret, "****")
        target = self._target
        if login is not None:
            check = target.login_settings(login[0]) if target else "the username and password"
            return (
                f"Redis at {self._where} refused the username or password ({detail}); check {check}"
            )
        if tls is not None:
            check = target.tls_settings(tls[0]) if target else "the TLS settings"
            return f"Redis at {self._where} failed TLS: {tls_problem(*tls)}; check {check}"
        mismatch = wrong_protocol(exc)
        if mismatch is not None:
            use = target.protocol_settings(mismatch.server_tls) if target else "the TLS settings"
            return f"Redis at {self._where}: {mismatch}; use {use}"
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
        """Run it; when the server lacks the script (a restart, a failover), run it by its
        source, which loads it there (on Redis Cluster, on the node of its keys)."""
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
        elif isinstance(result, Exception):
            raise result
    return results


def millis(ttl: float) -> int:
    if ttl <= 0:
        raise ValueError(f"ttl must be positive, got {ttl}")
    return math.ceil(ttl * 1000)
