"""Telegram updates into the gateway, acknowledged only once they are stored.

An update counts as taken when admission has stored, answered, refused or dropped it
(`submit` returned); only an update whose store was unreachable is not taken, so the
polling offset stops before it and a webhook call answers 503 (Telegram sends it again).
Messages of one chat are submitted in order; chats are taken concurrently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from telegram import Update

from adapters.telegram.access import TelegramAccess
from adapters.telegram.normalize import BotIdentity, inbound_from, press_from
from gateway.sdk import AdapterContext, ButtonPress, ChatKind, Inbound, Status

log = logging.getLogger(__name__)

PressHandler = Callable[[Update, ButtonPress | None], Awaitable[None]]


class UpdateIntake:
    def __init__(
        self,
        ctx: AdapterContext,
        access: TelegramAccess,
        *,
        group_context: bool,
        on_press: PressHandler,
        spawn: Callable[[Awaitable[None]], None],
    ) -> None:
        self._ctx = ctx
        self._access = access
        self._group_context = group_context
        self._on_press = on_press
        self._spawn = spawn
        self.me: BotIdentity | None = None

    async def take(self, updates: Sequence[Update]) -> int:
        """Take a batch in order per chat; returns how many leading updates were taken (the
        offset may move past those)."""
        lanes: dict[str, list[tuple[int, Update]]] = {}
        for index, update in enumerate(updates):
            lanes.setdefault(_lane(update), []).append((index, update))
        taken = [False] * len(updates)

        async def run(lane: list[tuple[int, Update]]) -> None:
            for index, update in lane:
                taken[index] = await self.take_one(update)
                if not taken[index]:
                    return  # the rest of this chat waits for the redelivery, in order

        await asyncio.gather(*(run(lane) for lane in lanes.values()))
        count = 0
        while count < len(taken) and taken[count]:
            count += 1
        return count

    async def take_one(self, update: Update) -> bool:
        assert self.me is not None
        if update.callback_query is not None:
            # A press is answered on its own; nothing in it needs storing first.
            self._spawn(self._on_press(update, press_from(update)))
            return True
        normalized = inbound_from(update, self.me)
        if normalized is None:
            return True
        inbound = normalized.inbound
        self._access.remember(inbound.sender.user_id, normalized.username)
        if not self._wanted(inbound):
            return True
        try:
            result = await self._ctx.submit(inbound)
        except Exception:
            log.exception("telegram update not taken update=%s", update.update_id)
            return False
        return result.status is not Status.UNAVAILABLE

    def _wanted(self, inbound: Inbound) -> bool:
        """Unaddressed group chatter goes to admission only as context, and only if allowed."""
        if inbound.chat.kind is ChatKind.DIRECT or inbound.mentioned or inbound.is_command:
            return True
        # A refusal for chatter nobody addressed to the bot would be noise.
        return self._group_context and self._access.allows(inbound)


def _lane(update: Update) -> str:
    chat = update.effective_chat
    return str(chat.id) if chat is not None else f"u{update.update_id}"
