"""Where a conversation's replies go: the serviceUrl of its last authenticated activity.

Kept in the store (sealed: the URL decides where the bot's token is sent) so that any
replica can answer, edit or remind in a conversation it never received an activity for.
"""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.sdk import DeliveryError, EntrySigner, Store, StoreUnavailable, keys

log = logging.getLogger(__name__)

_KIND = "teams conversation"


@dataclass(frozen=True)
class Conversation:
    service_url: str
    tenant_id: str | None = None


def trusted_service_url(url: str) -> bool:
    """HTTPS with a host, as every Bot Framework channel uses; plain HTTP only to this
    machine (the Bot Framework Emulator, tests)."""
    parts = urlsplit(url)
    if not parts.hostname or parts.username or parts.password:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme != "http":
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


class Conversations:
    def __init__(self, store: Store, signer: EntrySigner, ttl: float) -> None:
        self._store = store
        self._signer = signer
        self._ttl = ttl
        self._known: dict[str, Conversation] = {}

    async def remember(self, conversation_id: str, found: Conversation) -> None:
        """Store where `conversation_id` is answered (raises StoreUnavailable)."""
        if self._known.get(conversation_id) == found:
            return
        where = keys.platform_conversation("teams", conversation_id)
        value = {"service_url": found.service_url, "tenant_id": found.tenant_id}
        await self._store.set(where, self._signer.seal(_KIND, where, value), ttl=self._ttl)
        self._known[conversation_id] = found

    async def find(self, conversation_id: str) -> Conversation:
        """Where to send; DeliveryError when no activity of this conversation was seen."""
        found = self._known.get(conversation_id)
        if found is not None:
            return found
        where = keys.platform_conversation("teams", conversation_id)
        try:
            raw = await self._store.get(where)
        except StoreUnavailable as exc:
            raise DeliveryError(f"the store is unreachable ({exc})") from None
        value = self._signer.open(_KIND, where, raw)
        url = value.get("service_url") if isinstance(value, dict) else None
        if not isinstance(url, str) or not trusted_service_url(url):
            raise DeliveryError(
                "no Teams activity from this conversation is known, so there is no "
                "serviceUrl to answer it at",
                permanent=True,
            )
        tenant = value.get("tenant_id")
        found = Conversation(service_url=url, tenant_id=tenant if isinstance(tenant, str) else None)
        self._known[conversation_id] = found
        return found

    def service_urls(self) -> set[str]:
        return {c.service_url for c in self._known.values()}
