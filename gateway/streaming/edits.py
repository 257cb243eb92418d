"""The generic way to stream where a platform can edit: post the first words, then edit them.

Used for every adapter that declares `StreamSupport(edits=True)` and has no native
stream for the chat (Telegram groups and topics, Discord, Slack without its stream
methods). The adapter's own send and edit do the rendering, retries and 429 waits.
"""

from __future__ import annotations

import logging

from gateway.sdk.channels import Adapter, DeliveryError, MessageDeleter, MessageGone
from gateway.sdk.messages import ChatRef, Outbound, SentRef
from gateway.streaming.protocol import StreamFrame

log = logging.getLogger(__name__)


class EditStream:
    """One message of a reply: sent on the first update, edited on the next ones."""

    refresh: float | None = None

    def __init__(self, adapter: Adapter, chat: ChatRef, reply_to: str | None) -> None:
        self._adapter = adapter
        self._chat = chat
        self._reply_to = reply_to
        self._ref: SentRef | None = None
        self.limit = adapter.capabilities.max_len

    async def update(self, frame: StreamFrame) -> None:
        await self._show(frame.display)

    async def finish(self, text: str) -> SentRef:
        return await self._show(text)

    async def abort(self) -> None:
        ref, self._ref = self._ref, None
        if ref is None or not isinstance(self._adapter, MessageDeleter):
            return
        try:
            await self._adapter.delete(ref)
        except DeliveryError as exc:  # it stays; the final message follows it anyway
            log.info("streamed message not deleted chat=%s error=%s", self._chat.address, exc)

    async def _show(self, text: str) -> SentRef:
        out = Outbound(chat=self._chat, text=text, reply_to=self._reply_to)
        if self._ref is not None:
            try:
                await self._adapter.edit(self._ref, out)
                return self._ref
            except MessageGone:
                # Someone deleted it while it was being written: go on in a new message.
                log.info("streamed message was deleted; posting anew chat=%s", self._chat.address)
                self._ref = None
        self._ref = await self._adapter.send(out)
        return self._ref
