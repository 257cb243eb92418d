"""A session's persisted state (history, prompt snapshot, summary, usage) and history trimming.

/new archives a conversation: its record goes, but its turns stay in the search index
(gateway/store/search.py) until retention prunes them. /forget deletes both.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.llm.types import Message
from gateway.runtime.unicode import valid_unicode
from gateway.sessions.key import SessionKey
from gateway.store import keys
from gateway.store.base import Batch, Store

TRIMMED_NOTE = "[Earlier messages in this conversation were removed to save space.]"


@dataclass
class SessionRecord:
    messages: list[Message] = field(default_factory=list)
    # System prompt frozen when the session started, so memory edits mid-session do not
    # change the prefix the provider may have cached.
    system: str = ""
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # The oldest turns, folded into a summary by sessions/compaction.py, and how many they were.
    summary: str = ""
    summary_turns: int = 0
    # Tools the session loaded with load_tools beyond the core set (gateway/turn/toolbox.py).
    tools_loaded: list[str] = field(default_factory=list)
    # 1: `system` holds the prompt sections too (records written before they were rendered
    # each turn); 2: sections are added per turn, so a new skill shows up at once.
    prompt_version: int = 2

    @property
    def is_new(self) -> bool:
        return not self.messages and not self.system

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SessionRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known.setdefault("prompt_version", 1)
        return cls(**known)


class SessionStore:
    """Loads and saves session records; keeps an index of sessions per chat for /forget."""

    def __init__(self, store: Store, ended: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._store = store
        # Called with a session's key when it ends: its "for this session" approvals end too
        # (GrantBook.end_session), for good, even if a copy is written back later.
        self._ended = ended

    @staticmethod
    def store_key(key: SessionKey) -> str:
        return keys.session(key)

    _key = store_key

    @staticmethod
    def _index(chat_scope: str) -> str:
        return keys.chat_sessions(chat_scope)

    async def load(self, key: SessionKey) -> SessionRecord:
        return self.parse(await self._store.get(self._key(key)))

    @staticmethod
    def parse(raw: str | None) -> SessionRecord:
        """A record from its stored JSON (None: a new session)."""
        return SessionRecord.from_json(json.loads(raw)) if raw else SessionRecord()

    @staticmethod
    def encode(record: SessionRecord) -> str:
        record.updated = time.time()
        # vars(), not asdict(): the fields are JSON-ready already, and asdict deep-copies the
        # whole history on every turn (~0.2 ms at 40 messages).
        # valid_unicode: a tool result may carry a lone surrogate (a file read with
        # surrogateescape, an MCP server's JSON); stored as is it would fail the turn.
        return valid_unicode(json.dumps(vars(record), ensure_ascii=False))

    def save_ops(self, key: SessionKey, record: SessionRecord, encoded: str | None = None) -> Batch:
        """The writes that save a record, for the caller to run with its own (the end of a
        turn: gateway/sessions/leases.py) in one round trip."""
        if encoded is None:
            encoded = self.encode(record)
        updated = str(int(record.updated))
        # Every save marks the chat active (the console lists chats by it), so sessions that
        # began before the list existed appear on their next turn.
        batch = Batch().set(self._key(key), encoded).hset(keys.CHATS, key.chat_scope, updated)
        if record.turns <= 1:
            batch.hset(self._index(key.chat_scope), str(key), updated)
        return batch

    async def save(self, key: SessionKey, record: SessionRecord) -> None:
        await self._store.run(self.save_ops(key, record))

    async def clear(self, key: SessionKey) -> None:
        """End a conversation (/new): its turns stay searchable (session_search)."""
        # Approvals granted "for this session" end with the session.
        await self._store.delete(self._key(key), keys.approved_shapes(key))
        if self._ended is not None:
            await self._ended(str(key))
        await self._store.hdel(self._index(key.chat_scope), str(key))

    async def clear_chat(self, chat_scope: str) -> int:
        """Delete every session of a chat (all threads and users) and its turns in the search
        index (/forget); returns how many sessions."""
        index = self._index(chat_scope)
        names = list(await self._store.hgetall(index))
        if names:
            await self._store.delete(
                *(keys.session(k) for k in names), *(keys.approved_shapes(k) for k in names)
            )
            if self._ended is not None:
                for name in names:
                    await self._ended(name)
        await self._store.delete(index)
        await self._store.hdel(keys.CHATS, chat_scope)
        await self._store.search.forget_chat(chat_scope)
        return len(names)

    async def chats(self) -> dict[str, float]:
        """Every chat with a saved session -> when it was last active (the console)."""
        return {scope: float(at) for scope, at in (await self._store.hgetall(keys.CHATS)).items()}

    async def sessions_of(self, chat_scope: str) -> dict[str, float]:
        """The chat's sessions (SessionKey text) -> when each began."""
        index = await self._store.hgetall(self._index(chat_scope))
        return {name: float(at) for name, at in index.items()}


def estimate_tokens(messages: list[Message]) -> int:
    """About four characters per token: close enough to keep history under a budget.

    Counts the text fields instead of serialising every message: this runs every turn.
    """
    chars = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif content:
            chars += len(json.dumps(content, ensure_ascii=False))
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            chars += len(function.get("name", "")) + len(function.get("arguments", "")) + 30
    return chars // 4 + 4 * len(messages)


def compact(messages: list[Message], budget: int) -> list[Message]:
    """Drop the oldest whole turns until the history fits the token budget.

    A turn starts at a user message, so an assistant `tool_calls` message is never
    separated from its tool results. The newest turn is always kept.
    """
    if estimate_tokens(messages) <= budget:
        return messages
    if messages[:1] == [{"role": "user", "content": TRIMMED_NOTE}]:
        messages = messages[2:]
    starts = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    kept = messages
    for start in starts[1:]:
        kept = messages[start:]
        if estimate_tokens(kept) + 20 <= budget:
            break
    if kept is messages:
        return messages
    return [
        {"role": "user", "content": TRIMMED_NOTE},
        {"role": "assistant", "content": "OK."},
        *kept,
    ]
