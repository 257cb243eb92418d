"""The session inbox on Redis: one Lua script per operation (gateway/store/inbox.py).

The ready set is a sorted set of sessions with pending messages, scored by when they are
available to a worker (ms): the time they were queued while nobody runs them, the lease's
expiry while someone does (renewals move it on). A claim takes the oldest available one,
so a dead holder's session comes back as soon as its lease expires. Scripts read the
clock with TIME, so replicas agree on it. They compute per-session key names from
prefixes the caller passes. On Redis Cluster (RedisKeys with shards) the ready set, the
attempts hash and the pending total exist once per queue shard, and a session's keys carry
its shard's hash tag, so every script touches one slot: claims look at the shards in turn
(a rotating start), renewals and stats go to each shard in one pipeline. Pending
entries are `{entry_id}\\n{json}`: scripts compare ids without decoding JSON. Each take of a
lease bumps the session's fence key (INCR); every effect of a turn compares it with the
token the turn was taken with, in the same script.
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
    FinishResult,
    HeldLease,
    InboxEntry,
    IntakeRequest,
    IntakeResult,
    ReplyClaim,
)
from gateway.store.redis_base import RedisKeys, ScriptCall, Unavailable, millis, run_in_order
from gateway.store.redis_client import Command, ReplyError, Script, Wire

FENCE_TTL = 7 * 86400.0  # far beyond any turn: a fence must not lapse under a running one
_TOTALS_AGE = 0.25  # Cluster: seconds an intake trusts the other shards' pending totals

NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# KEYS: 1 seen, 2 pending, 3 ready, 4 lease, 5 record, 6 rate, 7 total, 8 started, 9 fence
# ARGV: 1 use seen, 2 seen ttl ms, 3 entry, 4 member, 5 (unused), 6 max queued, 7 max total,
#       8 rate limit (0: none), 9 rate ttl ms, 10 owner ('' = do not take the lease),
#       11 lease ttl ms, 12 noticed prefix, 13 reply prefix, 14 fence ttl ms,
#       15 the rate count when counted before (Redis Cluster: the counter is in another slot),
#       16 messages pending in the other queue shards (Redis Cluster; a recent reading)
INTAKE = Script(
    NOW
    + """
if ARGV[1] == '1' then
  if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then return {'duplicate'} end
end
local count = -1
local limit = tonumber(ARGV[8])
if limit > 0 then
  if ARGV[15] ~= '' then
    count = tonumber(ARGV[15])
  else
    local existed = redis.call('EXISTS', KEYS[6])
    count = redis.call('INCR', KEYS[6])
    if existed == 0 then redis.call('PEXPIRE', KEYS[6], ARGV[9]) end
  end
  if count > limit then return {'rate_limited', tostring(count)} end
end
local queued = redis.call('LLEN', KEYS[2])
if queued >= tonumber(ARGV[6]) then return {'queue_full', tostring(count), tostring(queued)} end
if tonumber(redis.call('GET', KEYS[7]) or '0') + tonumber(ARGV[16]) >= tonumber(ARGV[7]) then
  return {'overloaded', tostring(count), tostring(queued)}
end
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('INCR', KEYS[7])
local holder = redis.call('GET', KEYS[4])
if holder or ARGV[10] == '' then redis.call('ZADD', KEYS[3], 'NX', now, ARGV[4]) end
if holder then
  local notice = '0'
  if redis.call('SET', ARGV[12] .. holder, '1', 'NX', 'PX', 3600000) then notice = '1' end
  return {'stored', tostring(count), tostring(queued + 1), holder, notice}
end
if ARGV[10] == '' then return {'stored', tostring(count), tostring(queued + 1), '', '0'} end
redis.call('SET', KEYS[4], ARGV[10], 'PX', ARGV[11])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[11]), ARGV[4])
local token = redis.call('INCR', KEYS[9])
redis.call('PEXPIRE', KEYS[9], ARGV[14])
local head = redis.call('LINDEX', KEYS[2], 0)
local hid = string.match(head, '^[^\\n]*')
local attempt = redis.call('HINCRBY', KEYS[8], hid, 1)
local record = redis.call('GET', KEYS[5])
local reply = redis.call('GET', ARGV[13] .. hid)
return {'taken', tostring(count), tostring(queued + 1), '', '0', head, tostring(attempt),
        record and '1' or '0', record or '', reply and '1' or '0', reply or '', tostring(token)}
"""
)

# KEYS: 1 counter. ARGV: 1 ttl ms (set when this call made the counter).
COUNT = Script("""
local existed = redis.call('EXISTS', KEYS[1])
local count = redis.call('INCR', KEYS[1])
if existed == 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count
""")

# KEYS: 1 ready, 2 started. ARGV: 1 owner, 2 lease ttl ms, 3 pending prefix, 4 lease prefix,
# 5 record prefix, 6 reply prefix, 7 how many ready sessions to look at, 8 how many to take,
# 9 fence prefix, 10 fence ttl ms. Returns 8 fields per session taken.
CLAIM = Script(
    NOW
    + """
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[7]))
local taken = {}
local want = tonumber(ARGV[8])
for _, m in ipairs(members) do
  if #taken >= want * 8 then break end
  local lease = ARGV[4] .. m
  if redis.call('EXISTS', lease) == 1 then
    redis.call('ZADD', KEYS[1], 'XX', now + redis.call('PTTL', lease), m)
  else
    local head = redis.call('LINDEX', ARGV[3] .. m, 0)
    if not head then
      redis.call('ZREM', KEYS[1], m)
    else
      redis.call('SET', lease, ARGV[1], 'PX', ARGV[2])
      redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), m)
      local token = redis.call('INCR', ARGV[9] .. m)
      redis.call('PEXPIRE', ARGV[9] .. m, ARGV[10])
      local hid = string.match(head, '^[^\\n]*')
      local attempt = redis.call('HINCRBY', KEYS[2], hid, 1)
      local record = redis.call('GET', ARGV[5] .. m)
      local reply = redis.call('GET', ARGV[6] .. hid)
      for _, field in ipairs({m, head, tostring(attempt), record and '1' or '0', record or '',
                              reply and '1' or '0', reply or '', tostring(token)}) do
        table.insert(taken, field)
      end
    end
  end
end
return taken
"""
)

# KEYS: 1 lease, 2 pending, 3 ready, 4 total, 5 started, 6 fence, 7.. the written keys
# ARGV: 1 owner, 2 entry id, 3 member, 4 keep the lease for the next entry, 5 lease ttl ms,
#       6 reply prefix, 7 number of writes, 8 token ('' = check the holder only),
#       9 fence ttl ms, 10 absorbed entry ids joined by newlines ('' = none),
#       11.. writes: 'set' value | 'hset' field value
FINISH = Script(
    NOW
    + """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {'lost'} end
if ARGV[8] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[8] then return {'lost'} end
local i = 11
local k = 7
for w = 1, tonumber(ARGV[7]) do
  if ARGV[i] == 'set' then
    redis.call('SET', KEYS[k], ARGV[i + 1])
    i = i + 2
  else
    redis.call('HSET', KEYS[k], ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  end
  k = k + 1
end
local head = redis.call('LINDEX', KEYS[2], 0)
if head and string.sub(head, 1, #ARGV[2] + 1) == ARGV[2] .. '\\n' then
  redis.call('LPOP', KEYS[2])
  redis.call('DECR', KEYS[4])
end
redis.call('HDEL', KEYS[5], ARGV[2])
if ARGV[10] ~= '' then
  local absorbed = {}
  for aid in string.gmatch(ARGV[10], '[^\\n]+') do absorbed[aid] = true end
  for _, item in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
    local aid = string.match(item, '^[^\\n]*')
    if absorbed[aid] then
      redis.call('LREM', KEYS[2], 1, item)
      redis.call('DECR', KEYS[4])
      redis.call('HDEL', KEYS[5], aid)
    end
  end
end
local nxt = redis.call('LINDEX', KEYS[2], 0)
-- A release moves the fence on, so a renewal sent before it (the renewal thread's snapshot)
-- cannot take back the lease this run gave up.
local function release()
  redis.call('DEL', KEYS[1])
  if redis.call('EXISTS', KEYS[6]) == 1 then
    redis.call('INCR', KEYS[6])
    redis.call('PEXPIRE', KEYS[6], ARGV[9])
  end
end
if not nxt then
  redis.call('ZREM', KEYS[3], ARGV[3])
  release()
  return {'released'}
end
if ARGV[4] == '1' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[5])
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3])
  local token = redis.call('INCR', KEYS[6])
  redis.call('PEXPIRE', KEYS[6], ARGV[9])
  local nid = string.match(nxt, '^[^\\n]*')
  local attempt = redis.call('HINCRBY', KEYS[5], nid, 1)
  local reply = redis.call('GET', ARGV[6] .. nid)
  return {'next', nxt, tostring(attempt), reply and '1' or '0', reply or '', tostring(token)}
end
release()
redis.call('ZADD', KEYS[3], now, ARGV[3])
return {'released'}
"""
)

# KEYS: 1 ready, then lease and fence per lease. ARGV: 1 ttl ms, then owner, member and
# token per lease. A lapsed lease nobody took (its fence unmoved) is set again.
RENEW = Script(
    NOW
    + """
local renewed = {}
for n = 1, (#KEYS - 1) / 2 do
  local lease, fence = KEYS[2 * n], KEYS[2 * n + 1]
  local owner, member, token = ARGV[3 * n - 1], ARGV[3 * n], ARGV[3 * n + 1]
  local holder = redis.call('GET', lease)
  local ours = holder == owner
  if token ~= '0' then ours = redis.call('GET', fence) == token and (ours or not holder) end
  if ours then
    redis.call('SET', lease, owner, 'PX', ARGV[1])
    redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), member)
    renewed[n] = 1
  else
    renewed[n] = 0
  end
end
return renewed
"""
)

# KEYS: 1 fence, 2 reply. ARGV: 1 token, 2 value, 3 ttl ms
CLAIM_REPLY = Script("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'stale'} end
local existing = redis.call('GET', KEYS[2])
if existing then return {'taken', existing} end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {'claimed'}
""")

# KEYS: 1 fence, 2.. the written keys. ARGV: 1 token, 2 number of writes,
# 3.. writes: 'set' value ttl-ms ('0': none) | 'hset' field value
FENCED_WRITE = Script("""
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local i = 3
for k = 2, tonumber(ARGV[2]) + 1 do
  if ARGV[i] == 'set' then
    if ARGV[i + 2] == '0' then
      redis.call('SET', KEYS[k], ARGV[i + 1])
    else
      redis.call('SET', KEYS[k], ARGV[i + 1], 'PX', ARGV[i + 2])
    end
    i = i + 3
  else
    redis.call('HSET', KEYS[k], ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  end
end
return 1
""")

# KEYS: 1 pending, 2 ready, 3 total, 4 started. ARGV: 1 member
DROP = Script("""
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for _, item in ipairs(items) do
  redis.call('HDEL', KEYS[4], string.match(item, '^[^\\n]*'))
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if #items > 0 then redis.call('DECRBY', KEYS[3], #items) end
return #items
""")


# KEYS: 1 pending, 2 ready, 3 total, 4 started. ARGV: 1 member, 2 entry id
REMOVE = Script("""
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for _, item in ipairs(items) do
  if string.sub(item, 1, #ARGV[2] + 1) == ARGV[2] .. '\\n' then
    redis.call('LREM', KEYS[1], 1, item)
    redis.call('DECR', KEYS[3])
    redis.call('HDEL', KEYS[4], ARGV[2])
    if redis.call('LLEN', KEYS[1]) == 0 then redis.call('ZREM', KEYS[2], ARGV[1]) end
    return 1
  end
end
return 0
""")


# KEYS: 1 pending, 2 lease. ARGV: 1 message id, 2 new payload, 3 joined prefix
REPLACE = Script("""
local items = redis.call('LRANGE', KEYS[1], 0, -1)
for n, item in ipairs(items) do
  local cut = string.find(item, '\\n', 1, true)
  if cut then
    local id = string.sub(item, 1, cut - 1)
    local ok, decoded = pcall(cjson.decode, string.sub(item, cut + 1))
    if ok and type(decoded) == 'table' and decoded['message_id'] == ARGV[1] then
      if n == 1 and redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
      if redis.call('EXISTS', ARGV[3] .. id) == 1 then return 0 end
      redis.call('LSET', KEYS[1], n - 1, id .. '\\n' .. ARGV[2])
      return 1
    end
  end
end
return 0
""")


def intake_result(raw: list[Any], request: IntakeRequest) -> IntakeResult:
    status = raw[0]
    count = int(raw[1]) if len(raw) > 1 and int(raw[1]) >= 0 else None
    queued = int(raw[2]) if len(raw) > 2 else 0
    if status != "stored" and status != "taken":
        return IntakeResult(status, rate_count=count, queued=queued)
    if status == "stored":
        return IntakeResult(
            "stored", rate_count=count, queued=queued, holder=raw[3] or None, notice=raw[4] == "1"
        )
    assert request.lease_owner is not None
    claimed = Claimed(
        session=request.session,
        entry=InboxEntry.decode(raw[5]),
        record=raw[8] if raw[7] == "1" else None,
        owner=request.lease_owner,
        attempt=int(raw[6]),
        reply=raw[10] if raw[9] == "1" else None,
        token=int(raw[11]),
    )
    return IntakeResult("stored", rate_count=count, queued=queued, claimed=claimed)


def claimed_from(raw: list[Any], owner: str) -> list[Claimed]:
    return [
        Claimed(
            session=raw[i],
            entry=InboxEntry.decode(raw[i + 1]),
            record=raw[i + 4] if raw[i + 3] == "1" else None,
            owner=owner,
            attempt=int(raw[i + 2]),
            reply=raw[i + 6] if raw[i + 5] == "1" else None,
            token=int(raw[i + 7]),
        )
        for i in range(0, len(raw), 8)
    ]


SCRIPTS = (INTAKE, COUNT, CLAIM, FINISH, RENEW, DROP, REMOVE, CLAIM_REPLY, FENCED_WRITE, REPLACE)


def finish_result(raw: list[Any], session: str, owner: str, record: str | None) -> FinishResult:
    if raw[0] != "next":
        return FinishResult(raw[0])
    return FinishResult(
        "next",
        Claimed(
            session=session,
            entry=InboxEntry.decode(raw[1]),
            record=record,
            owner=owner,
            attempt=int(raw[2]),
            reply=raw[4] if raw[3] == "1" else None,
            token=int(raw[5]),
        ),
    )


def _check(replies: list[Any]) -> None:
    for reply in replies:
        if isinstance(reply, ReplyError):
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
            # The person's counter is in a slot of its own: counted first, one step before.
            with self._guard:
                counted = str(
                    await ScriptCall(COUNT, [rate], [millis(request.rate_ttl)]).run(self._wire)
                )
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
        return ScriptCall(CLAIM, [ready, started], args)

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
