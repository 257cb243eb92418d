"""Threads the bot has answered, remembered in the store so any replica knows them.

With `slack.thread_followups` on, a message in such a thread is for the bot even
without a mention; the memory expires after `slack.thread_ttl` seconds.
"""

from __future__ import annotations

import logging

from gateway.sdk import ChatKind, ChatRef, Store, StoreUnavailable, keys

log = logging.getLogger(__name__)


class AnsweredThreads:
    def __init__(self, store: Store, ttl: float) -> None:
        self._store = store
        self._ttl = ttl

    async def remember(self, chat: ChatRef) -> None:
        if chat.thread_id is None or chat.kind is ChatKind.DIRECT:
            return
        try:
            await self._store.set(_key(chat.chat_id, chat.thread_id), "1", ttl=self._ttl)
        except StoreUnavailable as exc:
            log.warning("thread not remembered chat=%s error=%s", chat.address, exc)

    async def answered(self, channel: str, thread_ts: str) -> bool:
        return await self._store.get(_key(channel, thread_ts)) is not None


def _key(channel: str, thread_ts: str) -> str:
    return keys.platform_thread("slack", channel, thread_ts)
