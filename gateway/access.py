"""Who may talk to the bot and who may approve; per-person rate limits.

Global rules come from `[access]`; adapters add platform rules (allowed chats,
guilds, roles) with `add_rule`. A refused person is told once per chat per
hour, so a refusal is never silent and never a flood.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gateway.config import AccessSettings
from gateway.messages import Inbound, InboundKind, UserRef
from gateway.store.base import Store

log = logging.getLogger(__name__)

# A rule returns None to let the message through, or one sentence for the person.
AccessRule = Callable[[Inbound], str | None]

NOT_ALLOWED = "Sorry, you are not allowed to use this bot. Ask its operator to add you."


@dataclass(frozen=True)
class AccessDecision:
    allowed: bool
    reason: str = ""
    notify: bool = False  # tell the person (first refusal in this chat this hour)


class AccessPolicy:
    def __init__(self, settings: AccessSettings, store: Store) -> None:
        self._settings = settings
        self._store = store
        self._admins = frozenset(settings.admins)
        self._allowed = frozenset(settings.allowed_users)
        self._blocked = frozenset(settings.blocked_users)
        self._rules: list[AccessRule] = []

    def add_rule(self, rule: AccessRule) -> None:
        self._rules.append(rule)

    def is_admin(self, user: UserRef) -> bool:
        return user.address in self._admins

    def may_approve(self, user: UserRef, requester: UserRef) -> bool:
        if self.is_admin(user):
            return True
        return (
            self._settings.approvers == "requester_and_admins" and user.address == requester.address
        )

    def approvers_label(self, requester: UserRef) -> str:
        if self._settings.approvers == "admins":
            return "an admin"
        return f"{requester.label} or an admin"

    def permits(self, inbound: Inbound) -> bool:
        """The static rules only: no rate limit, no notice (for messages kept as context)."""
        return inbound.kind is InboundKind.AGENT or self._static_reason(inbound) is None

    async def check(self, inbound: Inbound) -> AccessDecision:
        if inbound.kind is InboundKind.AGENT:
            return AccessDecision(True)  # scheduled jobs were checked when created
        reason = self._static_reason(inbound)
        # Refusals are told once per chat per hour, so nobody is left guessing or flooded.
        notice_key, notice_ttl = f"refused:{inbound.chat.address}:{inbound.sender.user_id}", 3600
        if (
            reason is None
            and self._settings.rate_limit_per_minute
            and not self.is_admin(inbound.sender)
        ):
            reason = await self._rate_limited(inbound.sender)
            # Rate-limited people are told once per minute window: each window drops messages.
            notice_key, notice_ttl = f"ratelimited:{inbound.sender.address}:{_window()}", 120
        if reason is None:
            return AccessDecision(True)
        log.info("access refused user=%s chat=%s", inbound.sender.address, inbound.chat.address)
        notify = await self._store.set(notice_key, "1", ttl=notice_ttl, only_if_absent=True)
        return AccessDecision(False, reason, notify)

    def _static_reason(self, inbound: Inbound) -> str | None:
        user = inbound.sender.address
        if user in self._blocked:
            return NOT_ALLOWED
        if self.is_admin(inbound.sender):
            return None
        if self._allowed and user not in self._allowed:
            return NOT_ALLOWED
        for rule in self._rules:
            reason = rule(inbound)
            if reason is not None:
                return reason
        return None

    async def _rate_limited(self, user: UserRef) -> str | None:
        count = await self._store.incr(f"rate:{user.address}:{_window()}", ttl=120)
        if count > self._settings.rate_limit_per_minute:
            return (
                "You are sending messages faster than I can take them; wait a minute and try again."
            )
        return None


def _window() -> int:
    return int(time.time() // 60)
