"""The production Store on Redis, shared by every gateway replica: commands go in batches
through redis_client.py, subscriptions through redis.asyncio's PubSub, on one server, a
Sentinel-managed master or a Redis Cluster (redis_topology.py).

Key schema, everything under `{prefix}:` (RedisSettings.key_prefix, default `chatgate`):

    {prefix}:k:{key}        values, hashes and lists (one Redis key each, so a key has one type)
    {prefix}:lease:{name}   a lease: the owner token as a string with a PX expiry
    {prefix}:ch:{channel}   a pub/sub channel (channels ignore the db number, so the prefix
                            also keeps two deployments on one server apart)

On Redis Cluster (and only there) the keys that scripts touch together carry a hash tag
(RedisKeys in redis_base.py): `{prefix}:{qN}:k:{key}` and `{prefix}:{qN}:lease:{name}` for
a session's inbox, lease, record, fence, reply slots and join marks, with the ready set,
attempts hash and pending total of its queue shard N; `{prefix}:{search}:k:search:...` for
the search index. One server and Sentinel keep the untagged names above, so a deployment
moving to Cluster starts with an empty store (or copies its keys over), and one that stays
needs no migration.

Pub/sub on Cluster is the cluster-wide kind: PUBLISH goes to any node and the cluster bus
carries it to every node, replicas included; a listener subscribes on one node and moves to
another when that one fails.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncGenerator, Callable
from typing import Any, cast

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import RedisCluster

from gateway.runtime.backoff import Backoff
from gateway.store.base import Batch, Store
from gateway.store.inbox import (
    Claimed,
    FinishResult,
    HeldLease,
    InboxEntry,
    IntakeRequest,
    IntakeResult,
    ReplyClaim,
)
from gateway.store.keys import fence as fence_key
from gateway.store.redis_base import (
    NETWORK_ERRORS,
    RedisKeys,
    ScriptCall,
    Unavailable,
    millis,
    run_in_order,
)
from gateway.store.redis_client import (
    Command,
    RedisCommands,
    Script,
    Wire,
    is_no_script,
    load_scripts,
)
from gateway.store.redis_inbox import RedisInbox
from gateway.store.redis_inbox_scripts import finish_result
from gateway.store.redis_once import incr_call, push_call
from gateway.store.redis_topology import RedisTarget, open_client
from gateway.store.search import SearchDoc, SearchIndex
from gateway.store.search_redis import RedisSearch

log = logging.getLogger(__name__)

_BATCHES = 4  # pipelines in flight at once (redis_client.py); each carries many commands
_RETRIES = 3  # after a network error, for one server: backoff 0.05 s doubling, at most 1 s
_FAILOVER_RETRIES = 12  # Sentinel: ~7 s of retries, longer than a failover
# Cluster: redis-py waits 0.25 s and reads the slot map again between attempts; a failover
# takes the node timeout (cluster-node-timeout) and an election.
_CLUSTER_RETRIES = 60
QUEUE_SHARDS = 16  # Redis Cluster: queue shards, each with its own hash tag (redis_inbox.py)
_SUBSCRIBERS = 10_000  # connections for subscriptions: one per listener
_SUBSCRIBER_HEALTH_CHECK = 10  # PING an idle subscription this often to notice a dead peer
# `listen` reads with this timeout, far below the subscriber socket_timeout (a read that times
# out there drops the connection), so it can notice close() and send a health-check PING on an
# idle channel.
_LISTEN_POLL = 1.0
# Between two attempts to subscribe again after an outage: 0.2 s, doubling, at most 2 s.
_LISTEN_BACKOFF = Backoff(0.2, cap=2.0, jitter=(0.5, 1.0))
_READS = frozenset({"get", "lease_owner"})  # batch operations that change nothing

# Lease scripts compare the owner token and act in one step, so a lease that expired and went to
# someone else between a GET and a write is never touched.
_ACQUIRE = Script("""
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
    return 1
end
return 0
""")
_RENEW = Script("""
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
""")
_RELEASE = Script("""
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
""")


def _run_end(
    ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]], start: int, *, one_slot: bool
) -> int:
    """Where the run of operations that can go as one command, from `start`, ends: counter
    increments (not on Redis Cluster, where they are in many slots), or HSETs on the same
    hash."""
    name, args, _ = ops[start]
    end = start + 1
    if name == "incr" and one_slot:
        while end < len(ops) and ops[end][0] == "incr":
            end += 1
    elif name == "hset":
        while end < len(ops) and ops[end][0] == "hset" and ops[end][1][0] == args[0]:
            end += 1
    return end


def _to_redo(
    ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]], missing: list[int]
) -> list[int]:
    """The operations of a batch to run again after its scripts in `missing` failed: those,
    and each later read of a key one of them touches (reads of other keys were right)."""
    failed: set[tuple[bool, str]] = set()
    again: list[int] = []
    for i in range(missing[0], len(ops)):
        name, args, _ = ops[i]
        key = (name.endswith("lease") or name == "lease_owner", args[0])
        if i in missing:
            failed.add(key)
            again.append(i)
        elif name in _READS and key in failed:
            again.append(i)
    return again


def _one(done: Callable[[Any], Any]) -> Callable[[Any], list[Any]]:
    return lambda raw: [done(raw)]


def _set(name: str, value: str, ttl: float | None, only_if_absent: bool) -> list[Any]:
    command: list[Any] = ["SET", name, value]
    if ttl is not None:
        command += ["PX", millis(ttl)]
    if only_if_absent:
        command.append("NX")
    return command


def _pairs(flat: list[str]) -> dict[str, str]:
    """HGETALL's reply, field, value, field, value..., as a dict."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _same(raw: Any) -> Any:
    return raw


def _not_none(raw: Any) -> bool:  # SET: "OK", or nil when NX found the key
    return raw is not None


def _nothing(raw: Any) -> None:
    return None


def _first_int(raw: list[Any]) -> int:
    return int(raw[0])


class RedisStore(Store):
    """Store over Redis (one server, or a master behind Sentinel); connects lazily."""

    def __init__(
        self,
        url: str = "",
        *,
        key_prefix: str = "chatgate",
        max_connections: int = 64,
        retries: int | None = None,
        socket_timeout: float = 5.0,
        target: RedisTarget | None = None,
        queue_shards: int = QUEUE_SHARDS,
    ) -> None:
        target = target or RedisTarget(url=url)
        if retries is None:
            # Sentinel and Cluster: retry through a failover (a few seconds) rather than
            # fail the callers; one server: a short blip only.
            retries = {"single": _RETRIES, "sentinel": _FAILOVER_RETRIES}.get(
                target.mode, _CLUSTER_RETRIES
            )
        # Commands go in batches (redis_client.py), a few pipelines in flight, so a burst
        # queues in the batches instead of waiting for pooled connections. No command here
        # blocks server-side, so the timeout only trips on a dead or stuck server.
        # What a caller was told is stored must survive its master's death, so it hears back
        # once a replica has it (WAIT, redis_replicas.py): on Sentinel at the end of each
        # batch, on Cluster at the end of each master's part of it (on that part's
        # connection, which only the cluster client knows).
        commands = open_client(
            target,
            max_connections=max_connections,
            socket_timeout=socket_timeout,
            retries=retries,
            per_reply_timeout=False,
            cluster_replicas=1 if target.mode == "cluster" else 0,
        )
        wire = RedisCommands(
            commands,
            batches=min(max_connections, _BATCHES),
            # As long as every attempt may take, plus the backoff between them.
            deadline=socket_timeout * (retries + 1) + retries,
            replicas=1 if target.mode == "sentinel" else 0,
        )
        # Subscribers get their own pool: each holds a connection for as long as it
        # listens. Their reads pass _LISTEN_POLL.
        subscribers = open_client(
            target,
            max_connections=_SUBSCRIBERS,
            socket_timeout=max(socket_timeout, 5 * _LISTEN_POLL),
            retries=min(retries, 2),
            health_check_interval=_SUBSCRIBER_HEALTH_CHECK,
            raw_replies=False,
        )
        self._setup(
            wire,
            subscribers,
            key_prefix=key_prefix,
            where=target.where,
            secrets=target.secrets,
            target=target,
            owned=True,
            shards=queue_shards if target.mode == "cluster" else 0,
        )
        self.target = target
        self._twin_of = (target, key_prefix, socket_timeout, queue_shards)

    @classmethod
    def over(
        cls,
        wire: Wire,
        subscriber: Redis,
        *,
        key_prefix: str = "chatgate",
        where: str = "redis",
        password: str | None = None,
    ) -> RedisStore:
        """A store over commands and subscriptions the caller owns (the tests pass a wire
        over fakeredis, tests/fakeredis_wire.py): `close()` leaves both open. `subscriber`
        must decode responses; `where` and `password` are for error messages."""
        store = cls.__new__(cls)
        secrets = (password,) if password else ()
        store._setup(
            wire, subscriber, key_prefix=key_prefix, where=where, secrets=secrets, owned=False
        )
        return store

    def _setup(
        self,
        wire: Wire,
        sub_client: Redis,
        *,
        key_prefix: str,
        where: str,
        secrets: tuple[str, ...],
        owned: bool,
        shards: int = 0,
        target: RedisTarget | None = None,
    ) -> None:
        self._r = wire
        self._sub = sub_client
        self._owned = owned
        self._closed = False
        self.keys = RedisKeys(key_prefix, shards)
        self._guard = Unavailable(where, secrets, target)
        self._inbox = RedisInbox(wire, self.keys, self._guard)
        self._search = RedisSearch(wire, self.keys.data, self._guard)

    # -- plain values ---------------------------------------------------------------

    async def get(self, key: str) -> str | None:
        with self._guard:
            value = await self._r.call("GET", self.keys.data(key))
        return cast(str | None, value)

    async def set(
        self, key: str, value: str, *, ttl: float | None = None, only_if_absent: bool = False
    ) -> bool:
        with self._guard:
            done = await self._r.call(*_set(self.keys.data(key), value, ttl, only_if_absent))
        return done is not None

    async def delete(self, *keys: str) -> int:
        if not keys:
            return 0
        names = [self.keys.data(k) for k in keys]
        with self._guard:
            if self.keys.cluster:  # one slot per command
                return sum(int(n) for n in await self._r.many([("DEL", n) for n in names]))
            count = await self._r.call("DEL", *names)
        return int(count)

    async def incr(
        self, key: str, amount: int = 1, *, ttl: float | None = None, once: str | None = None
    ) -> int:
        call = incr_call([(self.keys.data(key), amount, ttl, once)], cluster=self.keys.cluster)
        with self._guard:
            [value] = await call.run(self._r)
        return int(value)

    async def expire(self, key: str, ttl: float) -> bool:
        with self._guard:
            done = await self._r.call("PEXPIRE", self.keys.data(key), millis(ttl))
        return bool(done)

    # -- hashes ---------------------------------------------------------------------

    async def hset(self, name: str, field: str, value: str) -> None:
        with self._guard:
            await self._r.call("HSET", self.keys.data(name), field, value)

    async def hget(self, name: str, field: str) -> str | None:
        with self._guard:
            value = await self._r.call("HGET", self.keys.data(name), field)
        return cast(str | None, value)

    async def hdel(self, name: str, *fields: str) -> int:
        if not fields:
            return 0
        with self._guard:
            count = await self._r.call("HDEL", self.keys.data(name), *fields)
        return int(count)

    async def hgetall(self, name: str) -> dict[str, str]:
        with self._guard:
            flat = await self._r.call("HGETALL", self.keys.data(name))
        return _pairs(flat)

    # -- lists ----------------------------------------------------------------------

    async def push(self, key: str, value: str, *, max_len: int | None = None) -> int:
        if max_len is not None and max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        call = push_call(self.keys.data(key), value, max_len, cluster=self.keys.cluster)
        with self._guard:
            length = await call.run(self._r)
        return int(length)

    async def list_range(self, key: str, start: int = 0, end: int = -1) -> list[str]:
        with self._guard:
            items = await self._r.call("LRANGE", self.keys.data(key), start, end)
        return cast(list[str], items)

    # -- leases ---------------------------------------------------------------------

    async def acquire_lease(self, name: str, owner: str, ttl: float) -> bool:
        call = ScriptCall(_ACQUIRE, [self.keys.lease(name)], [owner, millis(ttl)])
        with self._guard:
            done = await call.run(self._r)
        return bool(done)

    async def renew_lease(self, name: str, owner: str, ttl: float) -> bool:
        call = ScriptCall(_RENEW, [self.keys.lease(name)], [owner, millis(ttl)])
        with self._guard:
            done = await call.run(self._r)
        return bool(done)

    async def release_lease(self, name: str, owner: str) -> bool:
        call = ScriptCall(_RELEASE, [self.keys.lease(name)], [owner])
        with self._guard:
            done = await call.run(self._r)
        return bool(done)

    async def lease_owner(self, name: str) -> str | None:
        with self._guard:
            owner = await self._r.call("GET", self.keys.lease(name))
        return cast(str | None, owner)

    # -- batches --------------------------------------------------------------------

    async def run(self, batch: Batch) -> list[Any]:
        if len(batch.ops) < 2:
            return await super().run(batch)
        with self._guard:
            results = await self._pipeline(batch.ops)
            missing = [i for i, r in enumerate(results) if is_no_script(r)]
            if missing:
                # The server lost its script cache (a restart; on Cluster, one node's after a
                # failover). The other operations ran, in order; run the failed scripts again,
                # then the reads of their keys that followed them, so every result is as if
                # the batch had run once, in order.
                await load_scripts(self._r)
                again = _to_redo(batch.ops, missing)
                redone = await self._pipeline([batch.ops[i] for i in again])
                for i, value in zip(again, redone, strict=True):
                    results[i] = value
            for value in results:
                if isinstance(value, Exception):
                    raise value
        return results

    async def _pipeline(self, ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> list[Any]:
        """Send operations in one round trip; errors come back in place of their results.

        A run of counter increments with a TTL goes as one script call, and a run of HSETs
        on one hash as one HSET: a usage flush of a few hundred counters is a handful of
        commands, not hundreds."""
        commands: list[Command] = []
        expanders: list[tuple[int, Callable[[Any], list[Any]]]] = []  # (ops, their results)
        start = 0
        while start < len(ops):
            end = _run_end(ops, start, one_slot=not self.keys.cluster)
            if end - start > 1:
                command, expand = self._run_command(ops[start:end])
            else:
                name, args, kwargs = ops[start]
                command, done = self._command(name, *args, **kwargs)
                expand = _one(done)
            commands.append(command)
            expanders.append((end - start, expand))
            start = end
        raw = await self._r.many(commands)
        results: list[Any] = []
        for (count, expand), reply in zip(expanders, raw, strict=True):
            results += [reply] * count if isinstance(reply, Exception) else expand(reply)
        return results

    def _run_command(
        self, ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]]
    ) -> tuple[Command, Callable[[Any], list[Any]]]:
        """A run `_run_end` found, as one command, and how to spread its reply over the run."""
        if ops[0][0] == "hset":
            fields = [v for _, a, _ in ops for v in (a[1], a[2])]
            return ["HSET", self.keys.data(ops[0][1][0]), *fields], lambda raw: [None] * len(ops)
        return self._incr_call(ops).command(), lambda raw: [int(v) for v in raw]

    def _incr_call(self, ops: list[tuple[str, tuple[Any, ...], dict[str, Any]]]) -> ScriptCall:
        increments = [
            (self.keys.data(args[0]), args[1], kwargs["ttl"], kwargs.get("once"))
            for _, args, kwargs in ops
        ]
        return incr_call(increments, cluster=self.keys.cluster)

    def _command(self, op: str, *args: Any, **kwargs: Any) -> tuple[Command, Callable[[Any], Any]]:
        """One batch operation as a command, and how to turn its reply into the method's result."""
        if op == "get":
            return ["GET", self.keys.data(args[0])], _same
        if op == "set":
            command = _set(
                self.keys.data(args[0]), args[1], kwargs["ttl"], kwargs["only_if_absent"]
            )
            return command, _not_none
        if op == "incr":
            return self._incr_call([(op, args, kwargs)]).command(), _first_int
        if op == "hset":
            return ["HSET", self.keys.data(args[0]), args[1], args[2]], _nothing
        if op == "acquire_lease":
            name, owner, ttl = args
            return _ACQUIRE.command([self.keys.lease(name)], [owner, millis(ttl)]), bool
        if op == "lease_owner":
            return ["GET", self.keys.lease(args[0])], _same
        if op == "release_lease":
            return _RELEASE.command([self.keys.lease(args[0])], [args[1]]), bool
        if op == "renew_lease":
            name, owner, ttl = args
            return _RENEW.command([self.keys.lease(name)], [owner, millis(ttl)]), bool
        raise ValueError(f"operation {op!r} cannot be batched")

    # -- the session inbox (gateway/store/redis_inbox.py) ----------------------------

    async def intake(self, request: IntakeRequest) -> IntakeResult:
        return await self._inbox.intake(request)

    async def claim(
        self, owner: str, lease_ttl: float, *, scan: int = 64, limit: int = 1
    ) -> list[Claimed]:
        return await self._inbox.claim(owner, lease_ttl, scan=scan, limit=limit)

    async def finish(
        self,
        session: str,
        entry_id: str,
        owner: str,
        writes: Batch,
        *,
        keep: bool,
        lease_ttl: float,
        record: str | None = None,
        index: SearchDoc | None = None,
        token: int | None = None,
        absorbed: tuple[str, ...] = (),
    ) -> FinishResult:
        outside, finish = self._inbox.finish_call(
            session,
            entry_id,
            owner,
            writes,
            keep=keep,
            lease_ttl=lease_ttl,
            token=token,
            absorbed=absorbed,
        )
        with self._guard:
            if outside:
                # Cluster: the writes in other slots (the chat list, a dead letter) go first,
                # so a crash after them loses nothing the turn's end had to record.
                for reply in await self._r.many(outside):
                    if isinstance(reply, Exception):
                        raise reply
            if index is None:
                raw = await finish.run(self._r)
            else:  # one round trip, the index first: a /forget that sees the end finds it
                fence = None if token is None else (self.keys.data(fence_key(session)), token)
                if self.keys.cluster and fence is not None:
                    # The index has a slot of its own: the token is checked a step before.
                    if not await self._inbox.fenced_write(session, fence[1], Batch()):
                        return FinishResult("lost")
                    fence = None
                add = self._search.add_call(index, fence=fence)
                _, raw = await run_in_order(self._r, [add, finish])
        self._inbox.totals_changed()
        return finish_result(list(raw), session, owner, record)

    async def renew_sessions(self, held: list[HeldLease], ttl: float) -> list[bool]:
        return await self._inbox.renew(held, ttl)

    async def claim_reply(
        self, session: str, token: int, entry_id: str, value: str, ttl: float
    ) -> ReplyClaim:
        return await self._inbox.claim_reply(session, token, entry_id, value, ttl)

    async def record_reply(self, session: str, entry_id: str, value: str, ttl: float) -> None:
        await self._inbox.record_reply(session, entry_id, value, ttl)

    async def fenced_write(self, session: str, token: int, writes: Batch) -> bool:
        return await self._inbox.fenced_write(session, token, writes)

    async def inbox_stats(self) -> tuple[int, float]:
        return await self._inbox.stats()

    async def pending(self, session: str) -> list[InboxEntry]:
        return await self._inbox.pending(session)

    async def remove_pending(self, session: str, entry_id: str) -> bool:
        return await self._inbox.remove(session, entry_id)

    async def replace_pending(self, session: str, message_id: str, payload: str) -> bool:
        return await self._inbox.replace(session, message_id, payload)

    async def drop_pending(self, session: str) -> int:
        return await self._inbox.drop(session)

    # -- pub/sub --------------------------------------------------------------------

    async def publish(self, channel: str, message: str) -> None:
        with self._guard:
            await self._r.call("PUBLISH", self.keys.channel(channel), message)

    async def listen(self, channel: str) -> AsyncGenerator[str, None]:
        # One subscription per iterator on the subscriber pool; redis-py resubscribes after a
        # short blip by itself, and this loop starts over with backoff after a longer outage.
        name = self.keys.channel(channel)
        failures = 0
        while not self._closed:
            pubsub = self._pubsub(moved=failures > 0)
            healthy = False
            try:
                if isinstance(self._sub, RedisCluster):
                    await self._sub.initialize()  # the slot map, read once (no-op after)
                await pubsub.subscribe(name)
                healthy = True
                if failures:
                    log.info("store.listen resubscribed channel=%s", channel)
                failures = 0
                while not self._closed:
                    message = await pubsub.get_message(
                        ignore_subscribe_messages=True, timeout=_LISTEN_POLL
                    )
                    if message is not None and message["type"] == "message":
                        yield message["data"]
            except NETWORK_ERRORS as exc:
                healthy = False
                # One warning per outage, not one per attempt.
                level = logging.DEBUG if failures else logging.WARNING
                log.log(
                    level,
                    "store.listen reconnecting channel=%s error=%s",
                    channel,
                    self._guard.describe(exc),
                )
                failures += 1
            finally:
                await _close_pubsub(pubsub, name if healthy else None)
            if failures and not self._closed:
                await _LISTEN_BACKOFF.wait(failures)

    def _pubsub(self, *, moved: bool) -> PubSub:
        """A subscription. On Cluster, after a failure, on a node picked at random: every
        node hears every PUBLISH, and the one it used may be the one that died."""
        if isinstance(self._sub, RedisCluster) and moved:
            node = random.choice(self._sub.get_nodes())
            return self._sub.pubsub(node=node, ignore_subscribe_messages=True)
        return self._sub.pubsub(ignore_subscribe_messages=True)

    @property
    def search(self) -> SearchIndex:
        return self._search

    # -- lifecycle ------------------------------------------------------------------

    async def ping(self) -> None:
        with self._guard:
            await self._r.call("PING")

    async def close(self) -> None:
        if self._closed:
            return
        # Listeners notice _closed within _LISTEN_POLL and end.
        self._closed = True
        if self._owned:
            await self._r.close()
            await self._sub.aclose()

    @property
    def shared(self) -> bool:
        return True

    def lease_renewal_twin(self) -> Callable[[], Store] | None:
        twin_of: tuple[RedisTarget, str, float, int] | None = getattr(self, "_twin_of", None)
        if twin_of is None:  # a client the caller owns (from_client): renew on its loop
            return None
        target, prefix, timeout, shards = twin_of
        # One connection of its own, so a renewal never queues behind the main loop's
        # commands; one retry: a renewal that fails is simply made again a third of a TTL on.
        return lambda: RedisStore(
            key_prefix=prefix,
            max_connections=1,
            retries=1,
            socket_timeout=timeout,
            target=target,
            queue_shards=shards,
        )


async def _close_pubsub(pubsub: PubSub, channel: str | None) -> None:
    """Unsubscribe (when the connection still works) and drop the subscriber connection."""
    try:
        if channel is not None:
            # Bounded: on a half-dead connection redis-py would retry with backoff first.
            async with asyncio.timeout(1.0):
                await pubsub.unsubscribe(channel)
    except (*NETWORK_ERRORS, TimeoutError, OSError):
        pass
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call]
