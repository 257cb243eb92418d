"""Who may talk to the bot and who may approve; per-person rate limits.

Global rules come from `[access]`; adapters add platform rules (allowed chats,
guilds, roles) with `add_rule`. A refused person is told once per chat per
hour, so a refusal is never silent and never a flood.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.config import AccessSettings
from gateway.messages import Inbound, InboundKind, UserRef
from gateway.store.base import Batch, Store

log = logging.getLogger(__name__)

# A rule returns None to let the message through, or one sentence for the person.
AccessRule = Callable[[Inbound], str | None]

NOT_ALLOWED = "Sorry, you are not allowed to use this bot. Ask its operator to add you."
RATE_LIMITED = "You are sending messages faster than I can take them; wait a minute and try again."


@dataclass(frozen=True)
class AccessDecision:
    allowed: bool
    reason: str = ""
    notify: bool = False  # tell the person (first refusal in this chat this hour)
    duplicate: bool = False  # the platform event was seen before: drop it silently
    also_results: list[Any] = field(default_factory=list)  # of the caller's `also` batch


class AccessPolicy:
    def __init__(self, settings: AccessSettings, store: Store) -> None:
        self._settings = settings
        self._store = store
        self._admins = frozenset(settings.admins)
        self._allowed = frozenset(settings.allowed_users)
        self._blocked = frozenset(settings.blocked_users)
        self._rules: list[AccessRule] = []
        self._local_counts: dict[str, int] = {}
        self._local_window = 0

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

    async def check(
        self,
        inbound: Inbound,
        *,
        dedupe: tuple[str, float] | None = None,
        also: Batch | None = None,
    ) -> AccessDecision:
        """May this message go on? In the same store round trip, with `dedupe` (key, ttl),
        claims the event id and reports a repeat as `duplicate`, and runs the caller's
        `also` operations, whose results come back in `also_results`."""
        if inbound.kind is InboundKind.AGENT:
            return AccessDecision(True)  # scheduled jobs were checked when created
        user = inbound.sender
        reason = self._static_reason(inbound)
        if reason is not None:
            # Told once per chat per hour, so nobody is left guessing or flooded.
            return await self._refused(
                inbound, reason, f"refused:{inbound.chat.address}:{user.user_id}", 3600
            )
        limited = bool(self._settings.rate_limit_per_minute) and not self.is_admin(user)
        # Replicas count in the store; one process alone counts in memory (nothing to share,
        # and losing the counts on a restart is harmless).
        count_in_store = limited and self._store.shared
        batch = Batch()
        if dedupe is not None:
            batch.set(dedupe[0], "1", ttl=dedupe[1], only_if_absent=True)
        if count_in_store:
            batch.incr(f"rate:{user.address}:{_window()}", ttl=120)
        extra = len(also.ops) if also is not None else 0
        if also is not None:
            batch.ops.extend(also.ops)
        results = await self._store.run(batch)
        also_results = results[len(results) - extra :]
        first = results.pop(0) if dedupe is not None else True
        if not first:
            return AccessDecision(False, duplicate=True, also_results=also_results)
        if limited:
            count = results.pop(0) if count_in_store else self._count_locally(user)
            if count > self._settings.rate_limit_per_minute:
                # Told once per minute window: each window drops messages.
                refusal = await self._refused(
                    inbound, RATE_LIMITED, f"ratelimited:{user.address}:{_window()}", 120
                )
                return dataclasses.replace(refusal, also_results=also_results)
        return AccessDecision(True, also_results=also_results)

    async def _refused(
        self, inbound: Inbound, reason: str, notice_key: str, notice_ttl: float
    ) -> AccessDecision:
        log.info("access refused user=%s chat=%s", inbound.sender.address, inbound.chat.address)
        notify = await self._store.set(notice_key, "1", ttl=notice_ttl, only_if_absent=True)
        return AccessDecision(False, reason, notify)

    def _count_locally(self, user: UserRef) -> int:
        window = _window()
        if window != self._local_window:
            self._local_counts.clear()
            self._local_window = window
        count = self._local_counts.get(user.address, 0) + 1
        self._local_counts[user.address] = count
        return count

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


def _window() -> int:
    return int(time.time() // 60)
