"""Teams' access lists (tenants, users) as a rule for the core's AccessPolicy."""

from __future__ import annotations

from adapters.teams.normalize import PLATFORM
from adapters.teams.settings import TeamsSettings
from gateway.sdk import NOT_ALLOWED, AccessRule, ChatRef, Inbound


class TeamsAccess:
    def __init__(self, settings: TeamsSettings) -> None:
        self._tenants = frozenset(t.lower() for t in settings.allowed_tenants)
        self._users = frozenset(u.lower() for u in settings.allowed_users)

    def tenant_allowed(self, tenant_id: str | None) -> bool:
        return not self._tenants or (tenant_id or "").lower() in self._tenants

    def refusal(self, chat: ChatRef, user_id: str) -> str | None:
        """None when `user_id` may use the bot in `chat`, else one sentence saying why not."""
        if not self.tenant_allowed(chat.space_id):
            return "This Microsoft 365 organisation is not allowed to use this bot."
        if self._users and user_id.lower() not in self._users:
            return NOT_ALLOWED
        return None

    def rule(self) -> AccessRule:
        def check(inbound: Inbound) -> str | None:
            if inbound.chat.platform != PLATFORM:
                return None
            return self.refusal(inbound.chat, inbound.sender.user_id)

        return check
