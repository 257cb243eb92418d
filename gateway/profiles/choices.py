"""The model a conversation switched to with /model, kept in the store so it survives
restarts and is the same on every replica."""

from __future__ import annotations

from gateway.sessions.key import SessionKey
from gateway.store import keys
from gateway.store.base import Store

# A choice nobody touched for this long is forgotten with its conversation's other traces.
CHOICE_TTL = 180 * 24 * 3600.0


class ModelChoices:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def get(self, session: SessionKey) -> str | None:
        return await self._store.get(keys.model_choice(session))

    async def set(self, session: SessionKey, ref: str) -> None:
        await self._store.set(keys.model_choice(session), ref, ttl=CHOICE_TTL)

    async def clear(self, session: SessionKey) -> None:
        await self._store.delete(keys.model_choice(session))
