"""Writes that count once: counter increments and list appends. Each carries an id, and a
sorted set beside its key (in its slot on Redis Cluster) keeps the ids it took: the same
write sent again changes nothing and answers as the first did.

Writes are sent again after a reply was lost: redis-py resends a pipeline whose connection
broke before its replies came, the store resends what a Cluster node lost in a failover
(redis_client.py), and the usage ledger sends a flush again after one failed. An id is kept
for ONCE_SECONDS, and at most the last ONCE_KEEP per key; resends come within a pipeline's
deadline or the ledger's next flushes. On Cluster a key whose name holds a `}` outside a
hash tag has no name in its slot to keep ids in: writes to it count at least once.
"""

from __future__ import annotations

import random
import time
from typing import Any

from gateway.store.base import ONCE_SECONDS
from gateway.store.redis_base import ScriptCall, millis
from gateway.store.redis_client import Script

ONCE_KEEP = 256

# Shared by the scripts: ARGV[1..3] are now (ms), how long an id is kept (ms) and how many.
# `taken` records an id (false: it is new) and drops the old ones; `expire_with` lets the ids
# expire with the key they are for when that one expires sooner.
_IDS = """
local now, keep_ms, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local function taken(ids, id)
  if redis.call('ZADD', ids, 'NX', now, id) == 0 then return true end
  redis.call('ZREMRANGEBYSCORE', ids, '-inf', now - keep_ms)
  redis.call('ZREMRANGEBYRANK', ids, 0, -keep - 1)
  return false
end
local function expire_with(ids, key)
  local left = redis.call('PTTL', key)
  redis.call('PEXPIRE', ids, (left > 0 and left < keep_ms) and left or keep_ms)
end
"""
# KEYS: each counter and its ids, in pairs. ARGV after the three above, per counter: its
# amount, its TTL in ms (0: none; it applies only when this call creates the counter) and the
# increment's id. Replies: the new values in order.
_INCR_ONCE = Script(
    _IDS
    + """
local values = {}
for i = 1, #KEYS / 2 do
  local counter, ids = KEYS[2 * i - 1], KEYS[2 * i]
  local amount, ttl, id = ARGV[3 * i + 1], tonumber(ARGV[3 * i + 2]), ARGV[3 * i + 3]
  if taken(ids, id) then
    values[i] = tonumber(redis.call('GET', counter) or '0')
  else
    local existed = redis.call('EXISTS', counter)
    values[i] = redis.call('INCRBY', counter, amount)
    if existed == 0 and ttl > 0 then redis.call('PEXPIRE', counter, ttl) end
    expire_with(ids, counter)
  end
end
return values
"""
)
# KEYS: the list and its ids. ARGV after the three above: the value, the length kept (0: all)
# and the append's id. Reply: the list's length after it.
_PUSH_ONCE = Script(
    _IDS
    + """
local max_len = tonumber(ARGV[5])
if not taken(KEYS[2], ARGV[6]) then
  redis.call('RPUSH', KEYS[1], ARGV[4])
  if max_len > 0 then redis.call('LTRIM', KEYS[1], -max_len, -1) end
  expire_with(KEYS[2], KEYS[1])
end
return redis.call('LLEN', KEYS[1])
"""
)
# The same without ids, for a key that has no name in its slot to keep them in.
_INCR = Script("""
local existed = redis.call('EXISTS', KEYS[1])
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if existed == 0 and tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {value}
""")
_PUSH = Script("""
redis.call('RPUSH', KEYS[1], ARGV[1])
if tonumber(ARGV[2]) > 0 then redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1) end
return redis.call('LLEN', KEYS[1])
""")

# (the counter's Redis name, amount, TTL in seconds or None, the increment's id or None)
Increment = tuple[str, int, float | None, str | None]


def _hash_tag(name: str) -> str | None:
    """The part of `name` Redis Cluster hashes, when it is not the whole name."""
    start = name.find("{")
    end = name.find("}", start + 1) if start >= 0 else -1
    return name[start + 1 : end] if end > start + 1 else None


def ids_key(name: str, *, cluster: bool) -> str | None:
    """Where the write ids of the key `name` are kept: a name in its slot on Cluster, None
    when there is none (a `}` outside a hash tag)."""
    if not cluster or _hash_tag(name) is not None:
        return f"{name}:once"
    if "}" in name:
        return None
    return f"{{{name}}}:once"  # the whole name is the tag: its own slot


def new_id() -> str:
    """A write's id, when its caller gave none: a resend of the same command counts once."""
    return f"{random.getrandbits(64):016x}"


def _ids_args() -> list[Any]:
    return [int(time.time() * 1000), int(ONCE_SECONDS * 1000), ONCE_KEEP]


def incr_call(increments: list[Increment], *, cluster: bool) -> ScriptCall:
    """One script call for `increments` (several only when they share a slot, as they do
    off Cluster); its reply is the new values in order."""
    keys: list[str] = []
    args = _ids_args()
    for counter, amount, ttl, once in increments:
        ids = ids_key(counter, cluster=cluster)
        if ids is None:
            if len(increments) > 1:
                raise ValueError(f"{counter!r} has no slot to share with other counters")
            return ScriptCall(_INCR, [counter], [amount, _ttl_ms(ttl)])
        keys += [counter, ids]
        args += [amount, _ttl_ms(ttl), once or new_id()]
    return ScriptCall(_INCR_ONCE, keys, args)


def push_call(name: str, value: str, max_len: int | None, *, cluster: bool) -> ScriptCall:
    """One append to the list `name`, keeping its newest `max_len`; the reply is its length."""
    ids = ids_key(name, cluster=cluster)
    if ids is None:
        return ScriptCall(_PUSH, [name], [value, max_len or 0])
    return ScriptCall(_PUSH_ONCE, [name, ids], [*_ids_args(), value, max_len or 0, new_id()])


def _ttl_ms(ttl: float | None) -> int:
    return 0 if ttl is None else millis(ttl)
