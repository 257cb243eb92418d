"""The search index on a plain redis-server: an inverted index of sorted sets (no modules).

Each term has a sorted set of the documents holding it, scored by time, per chat and across
all chats (gateway/store/keys.py lists the keys). A query intersects its terms' sets (ZINTERSTORE,
AGGREGATE MAX keeps the time as the score) and reads the newest; equal times come back in
reverse byte order of the id, which is what the embedded store's ORDER BY gives too.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from gateway.store import keys
from gateway.store.redis_base import ScriptCall
from gateway.store.redis_client import Script, Wire
from gateway.store.search import PruneResult, SearchDoc, SearchIndex

_CHUNK = 500

# KEYS: doc, chat set, session set, chats, sessions, and the turn's fence when fenced.
# ARGV: json, id, ts, chat, session, prefix of the chat's term sets, prefix of the global
# term sets, the fence token ('' = not fenced), then the terms. An earlier document with this
# id (a turn that ran again) loses its postings first; a stale turn's document is not added.
_ADD = Script("""
if ARGV[8] ~= '' and redis.call('GET', KEYS[6]) ~= ARGV[8] then return 0 end
local old = redis.call('GET', KEYS[1])
if old then
    local terms = cjson.decode(old)['terms']
    for i = 1, #terms do
        redis.call('ZREM', ARGV[6] .. terms[i], ARGV[2])
        redis.call('ZREM', ARGV[7] .. terms[i], ARGV[2])
    end
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
-- The newest time per chat and session (ZADD GT by hand: it needs Redis 6.2).
for i, member in ipairs({ARGV[4], ARGV[5]}) do
    local current = redis.call('ZSCORE', KEYS[3 + i], member)
    if not current or tonumber(current) < tonumber(ARGV[3]) then
        redis.call('ZADD', KEYS[3 + i], ARGV[3], member)
    end
end
for i = 9, #ARGV do
    redis.call('ZADD', ARGV[6] .. ARGV[i], ARGV[3], ARGV[2])
    redis.call('ZADD', ARGV[7] .. ARGV[i], ARGV[3], ARGV[2])
end
return 1
""")

# KEYS: a scratch key, then the sets to intersect. ARGV: limit.
_QUERY = Script("""
local args = {KEYS[1], #KEYS - 1}
for i = 2, #KEYS do args[#args + 1] = KEYS[i] end
args[#args + 1] = 'AGGREGATE'
args[#args + 1] = 'MAX'
redis.call('ZINTERSTORE', unpack(args))
local ids = redis.call('ZREVRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
redis.call('DEL', KEYS[1])
return ids
""")

# KEYS: the sorted sets to take documents out of, then the keys to delete. ARGV: how many
# sorted sets come first, then the member to take out of each. One script, so a removal is
# all or nothing and its batch ends with WAIT like every other write.
_REMOVE = Script("""
local sets = tonumber(ARGV[1])
for i = 1, sets do redis.call('ZREM', KEYS[i], ARGV[i + 1]) end
for i = sets + 1, #KEYS do redis.call('DEL', KEYS[i]) end
return #KEYS - sets
""")

SCRIPTS = (_ADD, _QUERY, _REMOVE)


class RedisSearch(SearchIndex):
    def __init__(
        self,
        wire: Wire,
        data_key: Callable[[str], str],
        guard: AbstractContextManager[None],
    ) -> None:
        self._r = wire
        self._k = data_key  # the store's name for a key (its prefix added)
        self._guard = guard  # turns network errors into StoreUnavailable

    async def add(self, doc: SearchDoc) -> None:
        with self._guard:
            await self.add_call(doc).run(self._r)

    def add_call(self, doc: SearchDoc, *, fence: tuple[str, int] | None = None) -> ScriptCall:
        """The script run that indexes `doc`, for a caller that sends it with others; with
        `fence` (the fence key as sent, the token) only while the fence equals the token."""
        script_keys = [
            self._k(keys.search_doc(doc.id)),
            self._k(keys.search_chat(doc.chat)),
            self._k(keys.search_session(doc.session)),
            self._k(keys.SEARCH_CHATS),
            self._k(keys.SEARCH_SESSIONS),
        ]
        args: list[Any] = [
            doc.encode(),
            doc.id,
            repr(doc.ts),
            doc.chat,
            doc.session,
            self._k(keys.search_term(doc.chat, "")),
            self._k(keys.search_all_term("")),
            "" if fence is None else str(fence[1]),
            *doc.terms,
        ]
        if fence is not None:
            script_keys.append(fence[0])
        return ScriptCall(_ADD, script_keys, args)

    async def search(
        self,
        query: Sequence[str],
        *,
        chat: str | None,
        session: str | None = None,
        limit: int = 10,
    ) -> list[SearchDoc]:
        if not query:
            return []
        if chat is None:
            sets = [self._k(keys.search_all_term(t)) for t in query]
        else:
            sets = [self._k(keys.search_term(chat, t)) for t in query]
        if session is not None:
            sets.append(self._k(keys.search_session(session)))
        scratch = self._k(f"search:tmp:{secrets.token_hex(8)}")
        with self._guard:
            ids = _strs(await ScriptCall(_QUERY, [scratch, *sets], [limit]).run(self._r))
            raw = (
                await self._r.call("MGET", *(self._k(keys.search_doc(i)) for i in ids))
                if ids
                else []
            )
        docs = [SearchDoc.decode(r) for r in _strs(raw)]
        # A session filter with a chat filter of another chat is empty, as in SQL.
        return [d for d in docs if chat is None or d.chat == chat]

    async def forget_chat(self, chat: str) -> int:
        with self._guard:
            ids = _strs(await self._r.call("ZRANGE", self._k(keys.search_chat(chat)), 0, -1))
            sessions: set[str] = set()
            removed = await self._remove(ids, sessions)
            await self._r.call("DEL", self._k(keys.search_chat(chat)))
            await self._r.call("ZREM", self._k(keys.SEARCH_CHATS), chat)
            if sessions:
                await self._r.call("ZREM", self._k(keys.SEARCH_SESSIONS), *sessions)
        return removed

    async def prune(self, before: float) -> PruneResult:
        cutoff = f"({before!r}"  # exclusive: older than `before`
        removed = 0
        with self._guard:
            chats = _strs(await self._r.call("ZRANGE", self._k(keys.SEARCH_CHATS), 0, -1))
            for chat in chats:
                chat_set = self._k(keys.search_chat(chat))
                ids = _strs(await self._r.call("ZRANGEBYSCORE", chat_set, "-inf", cutoff))
                removed += await self._remove(ids)
                if not await self._r.call("EXISTS", chat_set):
                    await self._r.call("ZREM", self._k(keys.SEARCH_CHATS), chat)
            sessions_key = self._k(keys.SEARCH_SESSIONS)
            stale = _strs(await self._r.call("ZRANGEBYSCORE", sessions_key, "-inf", cutoff))
            if stale:
                await self._r.call("ZREM", sessions_key, *stale)
        return PruneResult(removed, sorted(str(s) for s in stale))

    async def count(self, chat: str | None = None) -> int:
        with self._guard:
            if chat is not None:
                return int(await self._r.call("ZCARD", self._k(keys.search_chat(chat))))
            total = 0
            for name in _strs(await self._r.call("ZRANGE", self._k(keys.SEARCH_CHATS), 0, -1)):
                total += int(await self._r.call("ZCARD", self._k(keys.search_chat(name))))
            return total

    async def _remove(self, ids: list[str], sessions: set[str] | None = None) -> int:
        """Drop documents and every posting of theirs (callers hold the guard); the sessions
        they belonged to are added to `sessions`."""
        removed = 0
        for i in range(0, len(ids), _CHUNK):
            chunk = ids[i : i + _CHUNK]
            raw = await self._r.call("MGET", *(self._k(keys.search_doc(d)) for d in chunk))
            docs = [SearchDoc.decode(r) for r in _strs(raw)]
            if not docs:
                continue
            if sessions is not None:
                sessions.update(doc.session for doc in docs)
            sets: list[str] = []
            members: list[str] = []
            for doc in docs:
                names = [keys.search_term(doc.chat, term) for term in doc.terms]
                names += [keys.search_all_term(term) for term in doc.terms]
                names += [keys.search_chat(doc.chat), keys.search_session(doc.session)]
                sets += (self._k(name) for name in names)
                members += [doc.id] * len(names)
            deleted = [self._k(keys.search_doc(doc.id)) for doc in docs]
            await ScriptCall(_REMOVE, [*sets, *deleted], [len(sets), *members]).run(self._r)
            removed += len(docs)
        return removed


def _strs(values: Any) -> list[str]:
    """Replies as text (the client decodes responses); missing values are left out."""
    return [str(v) for v in values if v is not None]
