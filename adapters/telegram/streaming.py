"""Streamed replies in private chats: Bot API drafts (`sendMessageDraft`, Bot API 9.3+).

A draft is only a preview that Telegram animates as it changes and drops after about
30 seconds; the reply becomes a message with one ordinary `sendMessage` of its final
text. Groups, topics and chats where drafts are refused stream by posting and editing
instead (the core's generic way, through `TelegramSender.send` / `edit`).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from adapters.telegram.render import TELEGRAM_LIMIT
from adapters.telegram.sending import TelegramSender
from gateway.sdk import ChatRef, Outbound, SentRef, StreamFrame, StreamRefused

log = logging.getLogger(__name__)

# Shown again when unchanged this long, so a draft never expires while a tool runs.
DRAFT_REFRESH = 20.0


class DraftStream:
    """One message of a reply in a private chat, previewed as a draft."""

    limit = TELEGRAM_LIMIT
    refresh: float | None = DRAFT_REFRESH

    def __init__(
        self, sender: TelegramSender, chat: ChatRef, *, on_refused: Callable[[str], None]
    ) -> None:
        self._sender = sender
        self._chat = chat
        self._on_refused = on_refused  # told the chat id, so later replies there edit instead
        # One id per message: changes to the same id are animated, a new id starts afresh.
        self._draft_id = secrets.randbelow(2**31 - 2) + 1

    async def update(self, frame: StreamFrame) -> None:
        try:
            await self._sender.draft(self._chat, self._draft_id, frame.display)
        except StreamRefused as exc:
            log.warning("telegram drafts refused chat=%s error=%s", self._chat.address, exc)
            self._on_refused(self._chat.chat_id)
            raise

    async def finish(self, text: str) -> SentRef:
        return await self._sender.send(Outbound(chat=self._chat, text=text))

    async def abort(self) -> None:
        return None  # a draft is a preview only: nothing was sent, and it expires by itself
