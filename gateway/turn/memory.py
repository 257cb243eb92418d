"""Long-lived notes the agent keeps per chat and per person, within character budgets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum

from gateway.config import MemorySettings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.store import keys
from gateway.store.base import Batch, Store


class MemoryScope(StrEnum):
    CHAT = "chat"  # shared by everyone in the chat
    USER = "user"  # about one person, follows them across chats on a platform


class MemoryEditError(ValueError):
    """A memory edit that cannot be done; the message says how to fix it."""


@dataclass(frozen=True)
class Notes:
    chat: list[str]
    user: list[str]

    def render(self) -> str:
        """The block injected into the system prompt; empty when there are no notes."""
        parts = []
        if self.chat:
            parts.append("Notes about this chat:\n" + "\n".join(f"- {n}" for n in self.chat))
        if self.user:
            parts.append(
                "Notes about the person you are talking to:\n"
                + "\n".join(f"- {n}" for n in self.user)
            )
        return "\n\n".join(parts)


class MemoryBook:
    def __init__(self, store: Store, settings: MemorySettings) -> None:
        self._store = store
        self._settings = settings

    def _key(self, scope: MemoryScope, chat: ChatRef, user: UserRef) -> str:
        if scope is MemoryScope.CHAT:
            return keys.chat_memory(chat.platform, chat.chat_id)
        return keys.user_memory(user.platform, user.user_id)

    def budget(self, scope: MemoryScope) -> int:
        return self._settings.chat_chars if scope is MemoryScope.CHAT else self._settings.user_chars

    async def notes(self, chat: ChatRef, user: UserRef) -> Notes:
        """Both scopes' notes, in one round trip (a new session's first turn reads them)."""
        batch = Batch()
        for scope in (MemoryScope.CHAT, MemoryScope.USER):
            batch.get(self._key(scope, chat, user))
        chat_raw, user_raw = await self._store.run(batch)
        return Notes(_parsed(chat_raw), _parsed(user_raw))

    async def entries(self, scope: MemoryScope, chat: ChatRef, user: UserRef) -> list[str]:
        return _parsed(await self._store.get(self._key(scope, chat, user)))

    async def add(self, scope: MemoryScope, chat: ChatRef, user: UserRef, text: str) -> list[str]:
        text = _clean(text)
        notes = await self.entries(scope, chat, user)
        if text in notes:
            return notes
        return await self._save(scope, chat, user, [*notes, text])

    async def replace(
        self, scope: MemoryScope, chat: ChatRef, user: UserRef, old: str, new: str
    ) -> list[str]:
        notes = await self.entries(scope, chat, user)
        index = _find_one(notes, old)
        notes[index] = _clean(new)
        return await self._save(scope, chat, user, notes)

    async def remove(self, scope: MemoryScope, chat: ChatRef, user: UserRef, old: str) -> list[str]:
        notes = await self.entries(scope, chat, user)
        del notes[_find_one(notes, old)]
        return await self._save(scope, chat, user, notes)

    async def forget_chat(self, chat: ChatRef, user: UserRef) -> None:
        await self._store.delete(self._key(MemoryScope.CHAT, chat, user))

    async def _save(
        self, scope: MemoryScope, chat: ChatRef, user: UserRef, notes: list[str]
    ) -> list[str]:
        used = sum(len(n) for n in notes)
        limit = self.budget(scope)
        if used > limit:
            raise MemoryEditError(
                f"{scope.value} memory would hold {used} characters; the limit is {limit}. "
                "Replace or remove older notes first, or write a shorter note."
            )
        await self._store.set_json(self._key(scope, chat, user), notes)
        return notes


def _parsed(raw: str | None) -> list[str]:
    data = None if raw is None else json.loads(raw)
    return [str(n) for n in data] if isinstance(data, list) else []


def _clean(text: str) -> str:
    text = " ".join(text.split())
    if not text:
        raise MemoryEditError("the note is empty; write the fact to remember.")
    return text


def _find_one(notes: list[str], old: str) -> int:
    needle = " ".join(old.split()).lower()
    matches = [i for i, n in enumerate(notes) if needle and needle in n.lower()]
    if not matches:
        raise MemoryEditError(f"no note contains {old!r}. Current notes: {notes or 'none'}.")
    if len(matches) > 1:
        raise MemoryEditError(f"{len(matches)} notes contain {old!r}; quote more of the note.")
    return matches[0]
