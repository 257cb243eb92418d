"""The working indicator: a reaction on the message being answered while its turn runs.

Chosen over `assistant.threads.setStatus`, which only works in the assistant pane of apps
with the Agents & AI Apps feature; a reaction works in every channel, thread and DM and
needs only the `reactions:write` scope. Turns run in the process that received the
message, so this process-local bookkeeping sees every turn it has to mark.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from adapters.slack.sending import SlackSender
from gateway.sdk import ChatRef, DeliveryError

log = logging.getLogger(__name__)


@dataclass
class _Pending:
    channel: str
    ts: str
    shown: bool = False


class WorkingIndicator:
    def __init__(self, sender: SlackSender, emoji: str) -> None:
        self._sender = sender
        self._emoji = emoji
        # Per conversation, the messages waiting for an answer, oldest (the running turn) first.
        self._pending: dict[str, deque[_Pending]] = {}

    def expect(self, chat: ChatRef, ts: str) -> None:
        """A turn will answer message `ts` in `chat`."""
        if self._emoji:
            self._pending.setdefault(chat.address, deque()).append(_Pending(chat.chat_id, ts))

    async def show(self, chat: ChatRef) -> None:
        """The core's typing() call: react once on the message whose turn is running."""
        queue = self._pending.get(chat.address)
        if not queue or queue[0].shown:
            return
        pending = queue[0]
        pending.shown = True
        await self._react(pending, add=True)

    async def answered(self, chat: ChatRef, ts: str) -> None:
        """A reply to `ts` was sent: take the reaction off (a later typing() may put it back)."""
        pending = self._find(chat, ts)
        if pending is not None and pending.shown:
            pending.shown = False
            await self._react(pending, add=False)

    async def finished(self, chat: ChatRef, ts: str) -> None:
        """The turn for `ts` is over (answered, failed or cancelled): forget it."""
        pending = self._find(chat, ts)
        if pending is None:
            return
        queue = self._pending[chat.address]
        queue.remove(pending)
        if not queue:
            del self._pending[chat.address]
        if pending.shown:
            await self._react(pending, add=False)

    def _find(self, chat: ChatRef, ts: str) -> _Pending | None:
        for pending in self._pending.get(chat.address, ()):
            if pending.ts == ts:
                return pending
        return None

    async def _react(self, pending: _Pending, *, add: bool) -> None:
        try:
            await self._sender.react(pending.channel, pending.ts, self._emoji, add=add)
        except DeliveryError as exc:  # cosmetic: never fail a turn over it
            log.debug("working reaction failed channel=%s error=%s", pending.channel, exc)
