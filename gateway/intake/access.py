"""Who may talk to the bot, who may approve and use the chat's admin commands; rate limits.

Global rules come from `[access]`; platforms add their own (allowed chats, guilds,
roles) through `Extensions.add_access_rule`. A refused person is told once per chat
per hour, so a refusal is never silent and never a flood. The store work of the rate
limit happens in the intake round trip (gateway/intake/middlewares.py); this module decides.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from gateway.config import AccessSettings
from gateway.sdk.extensions import AccessRule
from gateway.sdk.messages import ChatKind, Inbound, InboundKind, UserRef
from gateway.store import keys
from gateway.store.base import Store

log = logging.getLogger(__name__)

NOT_ALLOWED = "Sorry, you are not allowed to use this bot. Ask its operator to add you."
RATE_LIMITED = "You are sending messages faster than I can take them; wait a minute and try again."
REFUSAL_TTL = 3600.0  # a refused person is told again after this long
RATE_WINDOW_TTL = 120.0


class AccessPolicy:
    def __init__(
        self, settings: AccessSettings, store: Store, rules: Sequence[AccessRule] = ()
    ) -> None:
        self._settings = settings
        self._store = store
        self._admins = frozenset(settings.admins)
        self._allowed = frozenset(settings.allowed_users)
        self._blocked = frozenset(settings.blocked_users)
        self._moderator_roles = frozenset(settings.moderator_roles)
        self.pairs = settings.unknown == "pair"
        # The platforms' rules (Extensions.access_rules), read on every check.
        self._rules = rules
        self._local_counts: dict[str, int] = {}
        self._local_window = 0

    def is_admin(self, user: UserRef) -> bool:
        return user.address in self._admins

    def may_moderate(self, user: UserRef, inbound: Inbound) -> bool:
        """May this person use the commands that act on everyone's conversation (/new,
        /forget) here? Anyone in a direct chat; in groups admins and moderator roles."""
        if inbound.chat.kind is ChatKind.DIRECT or self.is_admin(user):
            return True
        return bool(self._moderator_roles.intersection(user.roles))

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
        return inbound.kind is InboundKind.AGENT or self.refusal(inbound) is None

    def refusal(self, inbound: Inbound, *, paired: bool = False) -> str | None:
        """Why this person may not use the bot here (None: they may). `paired`: an admin let
        them in by pairing, which stands for the allow list (not for the platforms' rules)."""
        user = inbound.sender.address
        if user in self._blocked:
            return NOT_ALLOWED
        if self.is_admin(inbound.sender):
            return None
        if (self._allowed or self.pairs) and user not in self._allowed and not paired:
            return NOT_ALLOWED
        for rule in self._rules:
            reason = rule(inbound)
            if reason is not None:
                return reason
        return None

    def unlisted(self, inbound: Inbound) -> bool:
        """With `access.unknown = "pair"`: is this a person the allow list does not name (not
        blocked, not an admin), who may be let in by pairing?"""
        user = inbound.sender.address
        return (
            self.pairs
            and user not in self._blocked
            and user not in self._allowed
            and not self.is_admin(inbound.sender)
        )

    async def tell_refusal(self, inbound: Inbound) -> bool:
        """Whether to tell the person about a refusal: once per chat per hour."""
        log.info("access refused user=%s chat=%s", inbound.sender.address, inbound.chat.address)
        notice = keys.refused(inbound.chat.address, inbound.sender.user_id)
        return await self._store.set(notice, "1", ttl=REFUSAL_TTL, only_if_absent=True)

    # -- rate limit ------------------------------------------------------------------------

    def rate_limited(self, inbound: Inbound) -> bool:
        """Whether this message counts against a rate limit at all."""
        return (
            inbound.kind is InboundKind.USER
            and bool(self._settings.rate_limit_per_minute)
            and not self.is_admin(inbound.sender)
        )

    def rate_counter(self, inbound: Inbound) -> str | None:
        """The store counter for this message, when replicas share the count (else None:
        one process alone counts in memory; losing the counts on a restart is harmless)."""
        if not (self._store.shared and self.rate_limited(inbound)):
            return None
        return keys.rate(inbound.sender.address, _window())

    def over_limit(self, inbound: Inbound, stored_count: int | None) -> bool:
        if not self.rate_limited(inbound):
            return False
        count = stored_count if stored_count is not None else self._count_locally(inbound.sender)
        return count > self._settings.rate_limit_per_minute

    async def tell_rate_limit(self, inbound: Inbound) -> bool:
        """Whether to tell the person: once per minute window (each window drops messages)."""
        log.info("rate limited user=%s chat=%s", inbound.sender.address, inbound.chat.address)
        notice = keys.rate_limited(inbound.sender.address, _window())
        return await self._store.set(notice, "1", ttl=RATE_WINDOW_TTL, only_if_absent=True)

    def _count_locally(self, user: UserRef) -> int:
        window = _window()
        if window != self._local_window:
            self._local_counts.clear()
            self._local_window = window
        count = self._local_counts.get(user.address, 0) + 1
        self._local_counts[user.address] = count
        return count


def _window() -> int:
    return int(time.time() // 60)
