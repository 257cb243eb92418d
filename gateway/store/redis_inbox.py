"""The session inbox on Redis: one Lua script per operation (gateway/store/inbox.py; the
scripts are in redis_inbox_scripts.py).

The ready set is a sorted set of sessions with pending messages, scored by when they are
available to a worker (ms): the time they were queued while nobody runs them, the lease's
expiry while someone does (renewals move it on). A claim takes the oldest available one,
so a dead holder's session comes back as soon as its lease expires. On Redis Cluster
(RedisKeys with shards) the ready set, the attempts hash and the pending total exist once
per queue shard, and a session's keys carry its shard's hash tag, so every script touches
one slot: a claim reads every shard's head and takes the longest-waiting sessions across
shards (ties go to the shard whose turn it is), renewals go to each shard in one pipeline,
and the stats sum the shards.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from gateway.store import keys
from gateway.store.base import Batch
from gateway.store.inbox import (
    Claimed,
    HeldLease,
    InboxEntry,
    IntakeRequest,
    IntakeResult,
    ReplyClaim,
)
from gateway.store.redis_base import RedisKeys, ScriptCall, Unavailable, millis, run_in_order
from gateway.store.redis_client import Command, Wire
from gateway.store.redis_inbox_scripts import (
    CLAIM,
    CLAIM_REPLY,
    DROP,
    FENCED_WRITE,
    FINISH,
    INTAKE,
    REMOVE,
    RENEW,
    REPLACE,
    claimed_from,
    intake_result,
)
from gateway.store.redis_once import incr_call

FENCE_TTL = 7 * 86400.0  # far beyond any turn: a fence must not lapse under a running one
_TOTALS_AGE = 0.25  # Cluster: seconds an intake trusts the other shards' pending totals


def _check(replies: list[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):  # an error reply, or a failure left in place
            raise reply


class RedisInbox:
    """Runs the inbox scripts for a RedisStore (which delegates its inbox methods here)."""

    def __init__(self, wire: Wire, keys_: RedisKeys, guard: Unavailable) -> None:
        self._wire = wire
        self.keys = keys_
        self._guard = guard
        # Claims start at a shard of their own and move on by one each time, so every
        # shard is looked at first in turn, by every process.
        self._next_shard = random.randrange(keys_.shards) if keys_.shards else 0
        self._totals: list[int] = [0] * keys_.shards  # each shard's pending total, read at
        self._totals_read = -_TOTALS_AGE  # this time.monotonic()

    def _shard_keys(self, shard: int | None) -> tuple[str, str, str]:
        """The ready set, the attempts hash and the pending total of a shard."""
        k = self.keys
        return (
            k.at(shard, keys.SESSIONS_READY),
            k.at(shard, keys.SESSIONS_STARTED),
            k.at(shard, keys.PENDING_TOTAL),
        )

    def _placed(self, session: str, key: str) -> str | None:
        """The name of a write of a session's turn when it is in the session's slot (reply
        slots and join marks are put there); None when it is elsewhere (Cluster only)."""
        k = self.keys
        if key.startswith((keys.REPLY_PREFIX, keys.JOINED_PREFIX)):
            return k.near(session, key)
        name = k.data(key)
        return name if k.same_slot(name, session) else None

    async def _others_pending(self, shard: int | None) -> int:
        """Messages pending in the shards other than `shard`, read at most _TOTALS_AGE ago:
        `max_total` bounds the whole inbox, and each script sees its own shard's total only."""
        if shard is None:
            return 0
        now = time.monotonic()
        if now - self._totals_read > _TOTALS_AGE:
            names = [self._shard_keys(n)[2] for n in range(self.keys.shards)]
            with self._guard:
                replies = await self._wire.many([("GET", name) for name in names])
            _check(replies)
            self._totals = [int(r or 0) for r in replies]
            self._totals_read = now
        return sum(self._totals) - self._totals[shard]

    def totals_changed(self) -> None:
        """This process took messages out of the inbox: read the shards' totals afresh."""
        self._totals_read = -_TOTALS_AGE

    async def intake(self, request: IntakeRequest) -> IntakeResult:
        session, k = request.session, self.keys
        shard = k.shard(session)
        ready, started, total = self._shard_keys(shard)
        pending = k.data(keys.pending(session))
        counted = ""
        rate = k.data(request.rate_key) if request.rate_key else pending
        if request.rate_key and k.cluster:
            # The person's counter is in a slot of its own: counted first, one step before,
            # with an id, so the count sent again after a lost reply counts once.
            count = incr_call([(rate, 1, request.rate_ttl, None)], cluster=True)
            with self._guard:
                [value] = await count.run(self._wire)
            counted = str(value)
            rate = pending
        script_keys = [
            k.at(shard, request.seen) if request.seen else pending,
            pending,
            ready,
            k.lease(keys.session_lease(session)),
            k.data(keys.session(session)),
            rate,
            total,
            started,
            k.data(keys.fence(session)),
        ]
        args: list[str | int] = [
            "1" if request.seen else "0",
            millis(request.seen_ttl),
            request.entry.encode(),
            session,
            f"{time.time():.3f}",
            request.max_queued,
            request.max_total,
            request.rate_limit if request.rate_key else 0,
            millis(request.rate_ttl),
            request.lease_owner or "",
            millis(request.lease_ttl),
            k.at(shard, keys.noticed("")),
            k.at(shard, keys.REPLY_PREFIX),
            millis(FENCE_TTL),
            counted,
            await self._others_pending(shard),
        ]
        with self._guard:
            raw = await ScriptCall(INTAKE, script_keys, args).run(self._wire)
        result = intake_result(list(raw), request)
        if shard is not None and result.status == "stored":
            self._totals[shard] += 1  # this process's own messages count at once
        return result

    def _claim_call(
        self, shard: int | None, owner: str, lease_ttl: float, scan: int, limit: int
    ) -> ScriptCall:
        k = self.keys
        ready, started, _ = self._shard_keys(shard)
        args: list[str | int] = [
            owner,
            millis(lease_ttl),
            k.at(shard, keys.PENDING_PREFIX),
            k.lease_at(shard, keys.SESSION_LEASE_PREFIX),
            k.at(shard, keys.SESSION_PREFIX),
            k.at(shard, keys.REPLY_PREFIX),
            max(scan, limit),
            limit,
            k.at(shard, keys.FENCE_PREFIX),
            millis(FENCE_TTL),
        ]
        return ScriptCall(CLAIM, [ready, started, k.at(shard, keys.claimed(owner))], args)

    async def claim(
        self, owner: str, lease_ttl: float, *, scan: int = 64, limit: int = 1
    ) -> list[Claimed]:
        if not self.keys.cluster:
            with self._guard:
                raw = await self._claim_call(None, owner, lease_ttl, scan, limit).run(self._wire)
            return claimed_from(list(raw), owner)
        with self._guard:
            due = await self._due(limit)
            wanted: dict[int, int] = {}
            for _, shard, _ in due:
                wanted[shard] = wanted.get(shard, 0) + 1
            calls = [
                self._claim_call(n, owner, lease_ttl, scan, want) for n, want in wanted.items()
            ]
            results = await run_in_order(self._wire, calls) if calls else []
        taken = [c for raw in results for c in claimed_from(list(raw), owner)]
        # Oldest first across shards, as one ready set would give them.
        since = {session: queued for queued, _, session in due}
        return sorted(taken, key=lambda c: since.get(c.session, float("inf")))

    async def _due(self, limit: int) -> list[tuple[float, int, str]]:
        """The `limit` sessions waiting longest across every shard, as (since, shard,
        session): one pipeline reads the head of each shard's ready set (and the time). Of
        equal times, the shard whose turn it is to be looked at first wins: the start moves
        on by one shard per claim."""
        shards = self.keys.shards
        start, self._next_shard = self._next_shard, (self._next_shard + 1) % shards
        order = [(start + n) % shards for n in range(shards)]
        probes: list[Command] = [
            (
                "ZRANGEBYSCORE",
                self._shard_keys(n)[0],
                "-inf",
                "+inf",
                "WITHSCORES",
                "LIMIT",
                0,
                limit,
            )
            for n in order
        ]
        *heads, now = await self._wire.many([*probes, ("TIME",)])
        _check([*heads, now])
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        due = [
            (float(head[i + 1]), rank, order[rank], head[i])
            for rank, head in enumerate(heads)
            for i in range(0, len(head), 2)
            if float(head[i + 1]) <= now_ms
        ]
        due.sort()
        return [(since, shard, session) for since, _, shard, session in due[:limit]]

    def finish_call(
        self,
        session: str,
        entry_id: str,
        owner: str,
        writes: Batch,
        *,
        keep: bool,
        lease_ttl: float,
        token: int | None = None,
        absorbed: tuple[str, ...] = (),
    ) -> tuple[list[Command], ScriptCall]:
        """The FINISH script run (its result goes through `finish_result`), and on Redis
        Cluster the writes outside the session's slot, which the caller sends first."""
        k = self.keys
        ready, started, total = self._shard_keys(k.shard(session))
        script_keys = [
            k.lease(keys.session_lease(session)),
            k.data(keys.pending(session)),
            ready,
            total,
            started,
            k.data(keys.fence(session)),
        ]
        inside: list[Any] = []
        outside: list[Command] = []
        for op, op_args, _ in writes.ops:
            if op not in ("set", "hset"):
                raise ValueError(f"finish writes take set and hset only, not {op!r}")
            name = self._placed(session, op_args[0])
            if name is None:
                outside.append(["SET" if op == "set" else "HSET", k.data(op_args[0]), *op_args[1:]])
                continue
            script_keys.append(name)
            inside += ["set", op_args[1]] if op == "set" else ["hset", op_args[1], op_args[2]]
        args: list[Any] = [
            owner,
            entry_id,
            session,
            "1" if keep else "0",
            millis(lease_ttl),
            k.near(session, keys.REPLY_PREFIX),
            len(script_keys) - 6,
            "" if token is None else str(token),
            millis(FENCE_TTL),
            "\n".join(absorbed),
            *inside,
        ]
        return outside, ScriptCall(FINISH, script_keys, args)

    async def renew(self, held: list[HeldLease], ttl: float) -> list[bool]:
        if not held:
            return []
        k = self.keys
        by_shard: dict[int | None, list[int]] = {}
        for n, lease in enumerate(held):
            by_shard.setdefault(k.shard(lease.session), []).append(n)
        calls: list[ScriptCall] = []
        for shard, members in by_shard.items():
            script_keys = [self._shard_keys(shard)[0]]
            args: list[str | int] = [millis(ttl)]
            for n in members:
                lease = held[n]
                script_keys += [
                    k.lease(keys.session_lease(lease.session)),
                    k.data(keys.fence(lease.session)),
                ]
                args += [lease.owner, lease.session, str(lease.token)]
            calls.append(ScriptCall(RENEW, script_keys, args))
        with self._guard:
            results = await run_in_order(self._wire, calls)
        renewed = [False] * len(held)
        for members, raw in zip(by_shard.values(), results, strict=True):
            for n, flag in zip(members, raw, strict=True):
                renewed[n] = bool(int(flag))
        return renewed

    async def claim_reply(
        self, session: str, token: int, entry_id: str, value: str, ttl: float
    ) -> ReplyClaim:
        k = self.keys
        script_keys = [k.data(keys.fence(session)), k.near(session, keys.reply(entry_id))]
        with self._guard:
            raw = await ScriptCall(CLAIM_REPLY, script_keys, [str(token), value, millis(ttl)]).run(
                self._wire
            )
        return ReplyClaim(raw[0], raw[1] if len(raw) > 1 else None)

    async def record_reply(self, session: str, entry_id: str, value: str, ttl: float) -> None:
        name = self.keys.near(session, keys.reply(entry_id))
        with self._guard:
            await self._wire.call("SET", name, value, "PX", millis(ttl))

    async def fenced_write(self, session: str, token: int, writes: Batch) -> bool:
        k = self.keys
        script_keys = [k.data(keys.fence(session))]
        args: list[Any] = [str(token), 0]
        outside: list[Command] = []
        for op, op_args, options in writes.ops:
            if op == "set" and not options.get("only_if_absent"):
                ttl = options.get("ttl")
                write: list[Any] = ["set", op_args[1], millis(ttl) if ttl is not None else "0"]
            elif op == "hset":
                write = ["hset", op_args[1], op_args[2]]
            else:
                raise ValueError(f"fenced writes take set and hset only, not {op!r}")
            name = self._placed(session, op_args[0])
            if name is None:  # Cluster: another slot, written once the token checked out
                outside.append(_plain(k.data(op_args[0]), write))
                continue
            script_keys.append(name)
            args += write
        args[1] = len(script_keys) - 1
        with self._guard:
            done = bool(int(await ScriptCall(FENCED_WRITE, script_keys, args).run(self._wire)))
            if done and outside:
                _check(await self._wire.many(outside))
        return done

    async def stats(self) -> tuple[int, float]:
        shards: Sequence[int | None] = range(self.keys.shards) if self.keys.cluster else [None]
        commands: list[Command] = []
        for shard in shards:
            ready, _, total = self._shard_keys(shard)
            commands += [("GET", total), ("ZRANGE", ready, 0, 0, "WITHSCORES")]
        with self._guard:
            *replies, now = await self._wire.many([*commands, ("TIME",)])
        _check([*replies, now])
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        totals, heads = replies[::2], replies[1::2]
        oldest = min((float(head[1]) for head in heads if head), default=None)
        waited = max(now_ms - oldest, 0) / 1000 if oldest is not None else 0.0
        return sum(int(t or 0) for t in totals), waited

    async def pending(self, session: str) -> list[InboxEntry]:
        with self._guard:
            raw = await self._wire.call("LRANGE", self.keys.data(keys.pending(session)), 0, -1)
        return [InboxEntry.decode(str(item)) for item in raw]

    def _session_keys(self, session: str) -> list[str]:
        ready, started, total = self._shard_keys(self.keys.shard(session))
        return [self.keys.data(keys.pending(session)), ready, total, started]

    async def remove(self, session: str, entry_id: str) -> bool:
        with self._guard:
            removed = await ScriptCall(
                REMOVE, self._session_keys(session), [session, entry_id]
            ).run(self._wire)
        self.totals_changed()
        return bool(removed)

    async def replace(self, session: str, message_id: str, payload: str) -> bool:
        k = self.keys
        script_keys = [k.data(keys.pending(session)), k.lease(keys.session_lease(session))]
        args = [message_id, payload, k.near(session, keys.JOINED_PREFIX)]
        with self._guard:
            done = await ScriptCall(REPLACE, script_keys, args).run(self._wire)
        return bool(int(done))

    async def drop(self, session: str) -> int:
        with self._guard:
            dropped = await ScriptCall(DROP, self._session_keys(session), [session]).run(self._wire)
        self.totals_changed()
        return int(dropped)


def _plain(name: str, write: list[Any]) -> Command:
    """A fenced write (`set` value ttl-ms | `hset` field value) as a command of its own."""
    if write[0] == "hset":
        return ["HSET", name, write[1], write[2]]
    command: list[Any] = ["SET", name, write[1]]
    return command if write[2] == "0" else [*command, "PX", write[2]]
