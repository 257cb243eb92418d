"""A web chat user's conversations: each is a thread of the user's chat (`web:<user>/<id>`) and
its own session, listed with a title so people find them again on their next visit."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass

from gateway.sdk import Store, keys

TITLE_CHARS = 60


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    created: float
    updated: float


class Conversations:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def all(self, user: str) -> list[Conversation]:
        """Most recently used first."""
        found = [
            Conversation(id=cid, **json.loads(raw))
            for cid, raw in (await self._store.hgetall(keys.web_conversations(user))).items()
        ]
        return sorted(found, key=lambda c: -c.updated)

    async def get(self, user: str, conversation: str) -> Conversation | None:
        raw = await self._store.hget(keys.web_conversations(user), conversation)
        return None if raw is None else Conversation(id=conversation, **json.loads(raw))

    async def create(self, user: str, first_text: str) -> Conversation:
        line = " ".join(first_text.split()) or "New conversation"
        title = line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
        now = time.time()
        found = Conversation(secrets.token_hex(4), title, now, now)
        await self._save(user, found)
        return found

    async def touch(self, user: str, conversation: str) -> bool:
        """Mark it used now; False when the user has no such conversation."""
        found = await self.get(user, conversation)
        if found is None:
            return False
        await self._save(user, Conversation(found.id, found.title, found.created, time.time()))
        return True

    async def ensure(self, user: str, conversation: str, title: str) -> None:
        """A conversation with a fixed id (the user's notices), made when first needed."""
        if await self.get(user, conversation) is None:
            now = time.time()
            await self._save(user, Conversation(conversation, title, now, now))

    async def _save(self, user: str, conversation: Conversation) -> None:
        value = {
            "title": conversation.title,
            "created": conversation.created,
            "updated": conversation.updated,
        }
        await self._store.hset(keys.web_conversations(user), conversation.id, json.dumps(value))
