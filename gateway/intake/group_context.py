"""Recent group messages not addressed to the bot, kept as context for its next answer there."""

from __future__ import annotations

from gateway.sdk.messages import ChatKind, Inbound
from gateway.store import keys
from gateway.store.base import Store


class GroupContext:
    def __init__(self, store: Store, size: int, chars: int = 4000) -> None:
        self._store = store
        self._size = size
        self._chars = chars

    async def remember(self, inbound: Inbound) -> None:
        if self._size <= 0 or not inbound.text.strip():
            return
        line = f"{inbound.sender.label}: {inbound.text[:500]}"
        await self._store.push(keys.context(inbound.chat.address), line, max_len=self._size)

    async def take(self, inbound: Inbound) -> list[str]:
        """The lines kept since the bot last answered in this chat (and forget them)."""
        if self._size <= 0 or inbound.chat.kind is ChatKind.DIRECT:
            return []
        key = keys.context(inbound.chat.address)
        lines = await self._store.list_range(key)
        if lines:
            await self._store.delete(key)
        return within(lines, self._chars)


def within(lines: list[str], chars: int) -> list[str]:
    """The newest lines that fit in `chars` characters, oldest first."""
    kept: list[str] = []
    for line in reversed(lines):
        chars -= len(line) + 1
        if chars < 0:
            break
        kept.append(line)
    return kept[::-1]
