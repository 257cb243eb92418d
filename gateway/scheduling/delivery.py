"""Sending a job's message: retries with backoff, the platform's message id as the receipt, and
one report to the chat, or to the admins when the chat itself is unreachable.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.runtime.backoff import SPREAD, Backoff
from gateway.sdk.channels import DeliveryError, Outbox
from gateway.sdk.messages import ChatRef, Outbound, SentRef

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    sent: SentRef | None
    error: str | None
    attempts: int

    @property
    def ok(self) -> bool:
        return self.sent is not None


class Courier:
    def __init__(
        self,
        outbox: Outbox,
        *,
        attempts: int,
        base_delay: float,
        max_delay: float,
        admins: Sequence[str],
    ) -> None:
        self._outbox = outbox
        self._attempts = attempts
        self._backoff = Backoff(base_delay, cap=max_delay, jitter=SPREAD)
        self._admins = list(admins)

    async def send(self, out: Outbound, *, attempts: int | None = None) -> Delivery:
        """Send with retries; delivered only when the platform returned a message id."""
        tries = attempts or self._attempts
        error = "not sent"
        for attempt in range(1, tries + 1):
            try:
                sent = await self._outbox.send(out)
                if sent.message_id:
                    return Delivery(sent, None, attempt)
                error = "the platform returned no message id"
            except DeliveryError as exc:
                error = str(exc) or type(exc).__name__
                if exc.permanent:  # blocked, kicked, chat gone: retrying will not help
                    return Delivery(None, error, attempt)
            except Exception as exc:  # an adapter bug must not lose the run silently
                log.warning("delivery raised chat=%s", out.chat.address, exc_info=True)
                error = f"{type(exc).__name__}: {exc}"
            if attempt < tries:
                await self._backoff.wait(attempt)
        return Delivery(None, error, tries)

    async def report(self, chat: ChatRef, chat_text: str, admin_text: str) -> str:
        """Tell the chat once (one attempt); if it is unreachable, every reachable admin.

        Returns who was told: "chat", "admins" or "nobody" (then it is only in the log).
        """
        told = await self.send(Outbound(chat=chat, text=chat_text, markdown=False), attempts=1)
        if told.ok:
            return "chat"
        reached = 0
        for address in self._admins:
            platform, _, user_id = address.partition(":")
            if not user_id or not self._outbox.has(platform):
                continue
            try:
                direct = await self._outbox.direct_chat(platform, user_id)
            except DeliveryError as exc:
                log.warning("no direct chat with admin=%s error=%s", address, exc)
                continue
            sent = await self.send(Outbound(chat=direct, text=admin_text, markdown=False))
            reached += sent.ok
        if reached:
            return "admins"
        log.error("job failure reported to nobody chat=%s report=%r", chat.address, admin_text)
        return "nobody"
