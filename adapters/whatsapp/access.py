"""`whatsapp.allowed_numbers` as a rule for the core's AccessPolicy (and for button presses)."""

from __future__ import annotations

from adapters.whatsapp.normalize import PLATFORM
from adapters.whatsapp.settings import WhatsAppSettings
from gateway.sdk import NOT_ALLOWED, AccessRule, Inbound


class WhatsAppAccess:
    def __init__(self, settings: WhatsAppSettings) -> None:
        # People write numbers with "+" and spaces; WhatsApp's wa ids are digits only.
        self._numbers = frozenset(
            "".join(ch for ch in number if ch.isdigit()) for number in settings.allowed_numbers
        )

    def refusal(self, number: str) -> str | None:
        if self._numbers and number not in self._numbers:
            return NOT_ALLOWED
        return None

    def rule(self) -> AccessRule:
        def check(inbound: Inbound) -> str | None:
            if inbound.chat.platform != PLATFORM:
                return None
            return self.refusal(inbound.sender.user_id)

        return check
