"""Counter increments that count once. Each carries an id, and a sorted set beside the counter
(in its slot on Redis Cluster) keeps the ids it took: the same increment sent again adds
nothing and answers the counter's value.

Increments are sent again after a reply was lost: redis-py resends a pipeline whose
connection broke before its replies came, the store resends what a Cluster node lost in a
failover (redis_client.py), and the usage ledger sends a flush again after one failed. An id
is kept for ONCE_SECONDS, and at most the last ONCE_KEEP per counter; resends come within a
pipeline's deadline or the ledger's next flushes. A Cluster counter whose name holds a `}`
outside a hash tag has no name in its slot to keep ids in: it counts at least once.
"""

from __future__ import annotations

import random
import time
from typing import Any

from gateway.store.base import ONCE_SECONDS
from gateway.store.redis_base import ScriptCall, millis
from gateway.store.redis_client import Script

ONCE_KEEP = 256

# KEYS: each counter and its ids, in pairs. ARGV: now and how long an id is kept (ms), how many
# are kept; then per counter its amount, its TTL in ms (0: none; it applies only when this
# call creates the counter) and the increment's id. The ids expire with the counter when it
# expires sooner.
_INCR_ONCE = Script("""
local now, keep_ms, keep = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local values = {}
for i = 1, #KEYS / 2 do
  local counter, ids = KEYS[2 * i - 1], KEYS[2 * i]
  local amount, ttl, id = ARGV[3 * i + 1], tonumber(ARGV[3 * i + 2]), ARGV[3 * i + 3]
  if redis.call('ZADD', ids, 'NX', now, id) == 0 then
    values[i] = tonumber(redis.call('GET', counter) or '0')
  else
    local existed = redis.call('EXISTS', counter)
    values[i] = redis.call('INCRBY', counter, amount)
    if existed == 0 and ttl > 0 then redis.call('PEXPIRE', counter, ttl) end
    redis.call('ZREMRANGEBYSCORE', ids, '-inf', now - keep_ms)
    redis.call('ZREMRANGEBYRANK', ids, 0, -keep - 1)
    local left = redis.call('PTTL', counter)
    redis.call('PEXPIRE', ids, (left > 0 and left < keep_ms) and left or keep_ms)
  end
end
return values
""")
# The same without ids, for a counter that has no name in its slot to keep them in.
_INCR = Script("""
local existed = redis.call('EXISTS', KEYS[1])
local value = redis.call('INCRBY', KEYS[1], ARGV[1])
if existed == 0 and tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return {value}
""")

# (the counter's Redis name, amount, TTL in seconds or None, the increment's id or None)
Increment = tuple[str, int, float | None, str | None]


def _hash_tag(name: str) -> str | None:
    """The part of `name` Redis Cluster hashes, when it is not the whole name."""
    start = name.find("{")
    end = name.find("}", start + 1) if start >= 0 else -1
    return name[start + 1 : end] if end > start + 1 else None


def ids_key(counter: str, *, cluster: bool) -> str | None:
    """Where `counter`'s increment ids are kept: a name in its slot on Cluster, None when
    there is none (a `}` outside a hash tag)."""
    if not cluster or _hash_tag(counter) is not None:
        return f"{counter}:once"
    if "}" in counter:
        return None
    return f"{{{counter}}}:once"  # the whole counter name is the tag: its own slot


def new_id() -> str:
    """An increment's id, when its caller gave none: a resend of the same command counts once."""
    return f"{random.getrandbits(64):016x}"


def incr_call(increments: list[Increment], *, cluster: bool) -> ScriptCall:
    """One script call for `increments` (several only when they share a slot, as they do
    off Cluster); its reply is the new values in order."""
    keys: list[str] = []
    args: list[Any] = [int(time.time() * 1000), int(ONCE_SECONDS * 1000), ONCE_KEEP]
    for counter, amount, ttl, once in increments:
        ids = ids_key(counter, cluster=cluster)
        if ids is None:
            if len(increments) > 1:
                raise ValueError(f"{counter!r} has no slot to share with other counters")
            return ScriptCall(_INCR, [counter], [amount, _ttl_ms(ttl)])
        keys += [counter, ids]
        args += [amount, _ttl_ms(ttl), once or new_id()]
    return ScriptCall(_INCR_ONCE, keys, args)


def _ttl_ms(ttl: float | None) -> int:
    return 0 if ttl is None else millis(ttl)
