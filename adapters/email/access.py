"""`email.allowed_senders` (addresses, or `@domain` for a whole domain) as an access rule."""

from __future__ import annotations

from adapters.email.normalize import PLATFORM
from adapters.email.settings import EmailSettings
from gateway.sdk import NOT_ALLOWED, Inbound


class MailAccess:
    def __init__(self, settings: EmailSettings) -> None:
        self._addresses = {e for e in settings.allowed_senders if not e.startswith("@")}
        self._domains = {e[1:] for e in settings.allowed_senders if e.startswith("@")}

    def allows(self, address: str) -> bool:
        if not self._addresses and not self._domains:
            return True
        address = address.lower()
        return address in self._addresses or address.rpartition("@")[2] in self._domains

    def rule(self, inbound: Inbound) -> str | None:
        """The AccessPolicy rule: None lets the message through."""
        if inbound.chat.platform != PLATFORM or self.allows(inbound.sender.user_id):
            return None
        return NOT_ALLOWED
