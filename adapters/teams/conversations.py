"""Where a conversation's replies go: the serviceUrl of its last authenticated activity.

Kept in the store (sealed: the URL decides where the bot's token is sent) so that any
replica can answer, edit or remind in a conversation it never received an activity for.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from gateway.sdk import DeliveryError, EntrySigner, Store, StoreUnavailable, keys

log = logging.getLogger(__name__)

_KIND = "teams conversation"
_PERSON = "teams personal chat"
_REWRITE_AFTER = 24 * 3600.0
_MAX_KNOWN = 100_000


@dataclass(frozen=True)
class Conversation:
    service_url: str
    tenant_id: str | None = None


def trusted_service_url(url: str, *, allow_local: bool = False) -> bool:
    """HTTPS with a host, as every Bot Framework channel uses; with `allow_local`, plain HTTP
    to this machine too (the Bot Framework Emulator, tests)."""
    parts = urlsplit(url)
    if not parts.hostname or parts.username or parts.password:
        return False
    if parts.scheme == "https":
        return True
    if parts.scheme != "http" or not allow_local:
        return False
    if parts.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return False


class Conversations:
    def __init__(
        self, store: Store, signer: EntrySigner, ttl: float, *, allow_local: bool = False
    ) -> None:
        self._store = store
        self._signer = signer
        self._ttl = ttl
        self.allow_local = allow_local
        # Conversation id -> where it is answered, and when this process last wrote it.
        self._known: dict[str, tuple[Conversation, float]] = {}
        self._people: dict[str, tuple[str, float]] = {}  # user id -> personal chat, written

    async def remember(self, conversation_id: str, found: Conversation) -> None:
        """Store where `conversation_id` is answered (raises StoreUnavailable). Written again
        when it changed, or a day after this process last wrote it (the TTL moves on)."""
        known = self._known.get(conversation_id)
        now = time.monotonic()
        if known is not None and known[0] == found and now - known[1] < _REWRITE_AFTER:
            return
        where = keys.platform_conversation("teams", conversation_id)
        value = {"service_url": found.service_url, "tenant_id": found.tenant_id}
        await self._store.set(where, self._signer.seal(_KIND, where, value), ttl=self._ttl)
        self._keep(conversation_id, found, now)

    async def find(self, conversation_id: str) -> Conversation:
        """Where to send; DeliveryError when no activity of this conversation was seen."""
        known = self._known.get(conversation_id)
        if known is not None:
            return known[0]
        where = keys.platform_conversation("teams", conversation_id)
        try:
            raw = await self._store.get(where)
        except StoreUnavailable as exc:
            raise DeliveryError(f"the store is unreachable ({exc})") from None
        value = self._signer.open(_KIND, where, raw)
        url = value.get("service_url") if isinstance(value, dict) else None
        if not isinstance(url, str) or not trusted_service_url(url, allow_local=self.allow_local):
            raise DeliveryError(
                "no Teams activity from this conversation is known, so there is no "
                "serviceUrl to answer it at",
                permanent=True,
            )
        tenant = value.get("tenant_id")
        found = Conversation(service_url=url, tenant_id=tenant if isinstance(tenant, str) else None)
        # Read, not written: the next activity of this conversation writes it again.
        self._keep(conversation_id, found, 0.0)
        return found

    async def remember_person(self, user_id: str, conversation_id: str) -> None:
        """Store `conversation_id` as the personal chat with `user_id` (raises StoreUnavailable),
        for messages the gateway starts itself (a failed job's report to an admin)."""
        now = time.monotonic()
        known = self._people.get(user_id)
        if known is not None and known[0] == conversation_id and now - known[1] < _REWRITE_AFTER:
            return
        where = keys.platform_conversation("teams", f"user:{user_id}")
        sealed = self._signer.seal(_PERSON, where, {"conversation": conversation_id})
        await self._store.set(where, sealed, ttl=self._ttl)
        if len(self._people) >= _MAX_KNOWN:
            self._people.clear()
        self._people[user_id] = (conversation_id, now)

    async def personal_chat(self, user_id: str) -> str | None:
        """The personal chat's conversation id with `user_id`; None when they never wrote."""
        known = self._people.get(user_id)
        if known is not None:
            return known[0]
        where = keys.platform_conversation("teams", f"user:{user_id}")
        try:
            raw = await self._store.get(where)
        except StoreUnavailable as exc:
            raise DeliveryError(f"the store is unreachable ({exc})") from None
        value = self._signer.open(_PERSON, where, raw)
        found = value.get("conversation") if isinstance(value, dict) else None
        return found if isinstance(found, str) else None

    def service_urls(self) -> set[str]:
        return {known[0].service_url for known in self._known.values()}

    def _keep(self, conversation_id: str, found: Conversation, written: float) -> None:
        if len(self._known) >= _MAX_KNOWN and conversation_id not in self._known:
            self._known.clear()  # a cache: the store has them all
        self._known[conversation_id] = (found, written)
