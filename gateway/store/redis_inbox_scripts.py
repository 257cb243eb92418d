"""The inbox's Lua scripts on Redis (gateway/store/redis_inbox.py runs them) and the parsing
of their replies. Scripts read the clock with TIME, so replicas agree on it; they build
per-session key names from prefixes the caller passes (on Redis Cluster, prefixes carrying
the queue shard's hash tag, so every key a run touches is in one slot). Pending entries are
`{entry_id}\\n{json}`: scripts compare ids without decoding JSON. Each take of a lease bumps
the session's fence key (INCR); every effect of a turn compares it with the token the turn
was taken with, in the same script.
"""

from __future__ import annotations

from typing import Any

from gateway.store.inbox import Claimed, FinishResult, InboxEntry, IntakeRequest, IntakeResult
from gateway.store.redis_client import Script

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
local entry_id = string.match(ARGV[3], '^[^\\n]*')
-- This very request sent again (its first answer lost with a failed-over master): its entry
-- is pending already. The answer is the first one's, and nothing is stored twice.
local function sent_again()
  local items = redis.call('LRANGE', KEYS[2], 0, -1)
  local found = false
  for _, item in ipairs(items) do
    if string.sub(item, 1, #entry_id + 1) == entry_id .. '\\n' then
      found = true
      break
    end
  end
  if not found then return nil end
  local holder = redis.call('GET', KEYS[4])
  if ARGV[10] == '' or holder ~= ARGV[10] then
    return {'stored', '-1', tostring(#items), holder or '', '0'}
  end
  local head = items[1]
  local hid = string.match(head, '^[^\\n]*')
  local record = redis.call('GET', KEYS[5])
  local reply = redis.call('GET', ARGV[13] .. hid)
  return {'taken', '-1', tostring(#items), '', '0', head, redis.call('HGET', KEYS[8], hid) or '1',
          record and '1' or '0', record or '', reply and '1' or '0', reply or '',
          redis.call('GET', KEYS[9]) or '0'}
end
-- A refusal is kept in the seen key beside this request's entry id (one per delivery): the
-- request sent again gets the same refusal, and another delivery of the message is a duplicate.
local function refuse(answer)
  if ARGV[1] == '1' then
    redis.call('SET', KEYS[1], entry_id .. '\\n' .. table.concat(answer, ','), 'PX', ARGV[2])
  end
  return answer
end
local function refused_before()
  local first = redis.call('GET', KEYS[1])
  if not first or string.sub(first, 1, #entry_id + 1) ~= entry_id .. '\\n' then return nil end
  local answer = {}
  for field in string.gmatch(string.sub(first, #entry_id + 2), '[^,]+') do
    table.insert(answer, field)
  end
  return answer
end
if ARGV[1] == '1' then
  if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then
    return sent_again() or refused_before() or {'duplicate'}
  end
else
  local again = sent_again()
  if again then return again end
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
  if count > limit then return refuse({'rate_limited', tostring(count)}) end
end
local queued = redis.call('LLEN', KEYS[2])
if queued >= tonumber(ARGV[6]) then
  return refuse({'queue_full', tostring(count), tostring(queued)})
end
if tonumber(redis.call('GET', KEYS[7]) or '0') + tonumber(ARGV[16]) >= tonumber(ARGV[7]) then
  return refuse({'overloaded', tostring(count), tostring(queued)})
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

# KEYS: 1 ready, 2 started, 3 what this claim took (keys.claimed). ARGV: 1 owner (one per
# claim), 2 lease ttl ms, 3 pending prefix, 4 lease prefix, 5 record prefix, 6 reply prefix,
# 7 how many ready sessions to look at, 8 how many to take, 9 fence prefix, 10 fence ttl ms.
# Returns 8 fields per session taken.
CLAIM = Script(
    NOW
    + """
local taken = {}
local function take(m, head, attempt, token)
  local hid = string.match(head, '^[^\\n]*')
  local record = redis.call('GET', ARGV[5] .. m)
  local reply = redis.call('GET', ARGV[6] .. hid)
  for _, field in ipairs({m, head, tostring(attempt), record and '1' or '0', record or '',
                          reply and '1' or '0', reply or '', tostring(token)}) do
    table.insert(taken, field)
  end
end
-- This claim sent again (its first answer lost with a failed-over master): the sessions its
-- first run took, still under its lease, as that run answered; nothing is counted twice.
local before = redis.call('GET', KEYS[3])
if before then
  for m in string.gmatch(before, '[^\\n]+') do
    local head = redis.call('LINDEX', ARGV[3] .. m, 0)
    if head and redis.call('GET', ARGV[4] .. m) == ARGV[1] then
      local hid = string.match(head, '^[^\\n]*')
      take(m, head, redis.call('HGET', KEYS[2], hid) or '1', redis.call('GET', ARGV[9] .. m))
    end
  end
  return taken
end
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[7]))
local mine = {}
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
      take(m, head, redis.call('HINCRBY', KEYS[2], hid, 1), token)
      table.insert(mine, m)
    end
  end
end
if #mine > 0 then redis.call('SET', KEYS[3], table.concat(mine, '\\n'), 'PX', ARGV[2]) end
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
-- The fence moved: lost, unless this is the finish sent again (its first answer lost with a
-- failed-over master). Its first run dropped the entry and moved the fence on by exactly
-- one, keeping the lease under this run's owner for the next entry or releasing it; a
-- take-over would have moved the fence and left the entry, or named another holder.
local function sent_again()
  local moved = tostring(tonumber(ARGV[8]) + 1)
  if redis.call('GET', KEYS[6]) ~= moved then return {'lost'} end
  local head = redis.call('LINDEX', KEYS[2], 0)
  if head and string.sub(head, 1, #ARGV[2] + 1) == ARGV[2] .. '\\n' then return {'lost'} end
  local nid = head and string.match(head, '^[^\\n]*')
  local attempt = nid and redis.call('HGET', KEYS[5], nid)
  if not holder then
    -- Released, or kept for the next entry (whose run was then counted) and lapsed while
    -- the failover ran: nobody took it since, so it is taken back, as a renewal would.
    if ARGV[4] ~= '1' or not attempt then return {'released'} end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[5])
    redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3])
  elseif not head then
    return {'lost'}
  end
  local reply = redis.call('GET', ARGV[6] .. nid)
  return {'next', head, attempt or '1', reply and '1' or '0', reply or '', moved}
end
if ARGV[8] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[8] then return sent_again() end
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
local existing = redis.call('GET', KEYS[2])
if existing == ARGV[2] then return {'claimed'} end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {'stale'} end
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


SCRIPTS = (INTAKE, CLAIM, FINISH, RENEW, DROP, REMOVE, CLAIM_REPLY, FENCED_WRITE, REPLACE)


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
