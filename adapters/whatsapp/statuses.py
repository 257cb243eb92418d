"""Delivery statuses of the messages the bot sent (sent, delivered, read, failed): the latest
one kept in the store for a week, counted in the metrics, and every failure logged with
WhatsApp's error code and what to do about it."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable

from adapters.whatsapp.graph import OUTSIDE_WINDOW
from adapters.whatsapp.normalize import PLATFORM, StatusUpdate
from gateway.sdk import WEEK, Store

log = logging.getLogger(__name__)

# Statuses arrive out of order (read before delivered is common); a later one never
# replaces a further one.
_RANK = {"deleted": 0, "warning": 0, "sent": 1, "delivered": 2, "read": 3, "failed": 4}


def status_key(message_id: str) -> str:
    return f"whatsapp:status:{message_id}"


class DeliveryStatuses:
    def __init__(
        self,
        store: Store,
        count: Callable[[str], None],
        outside_window: Callable[[str], Awaitable[None]],
    ) -> None:
        self._store = store
        self._count = count  # one status seen, for the metrics
        # A sent message failed because the 24-hour window had closed (its id).
        self._outside_window = outside_window

    async def record(self, update: StatusUpdate) -> None:
        self._count(update.status)
        if update.status == "failed":
            codes = ",".join(str(code) for code, _ in update.errors) or "-"
            titles = "; ".join(title for _, title in update.errors)
            log.warning(
                "whatsapp message failed message=%s chat=%s:%s codes=%s error=%r",
                update.message_id,
                PLATFORM,
                update.recipient,
                codes,
                titles,
            )
        current = await latest_status(self._store, update.message_id)
        if current is None or _RANK.get(current, 0) <= _RANK.get(update.status, 0):
            record = {"status": update.status, "at": time.time(), "errors": update.errors}
            await self._store.set(status_key(update.message_id), json.dumps(record), ttl=WEEK)
        if update.status == "failed" and any(code == OUTSIDE_WINDOW for code, _ in update.errors):
            await self._outside_window(update.message_id)


async def latest_status(store: Store, message_id: str) -> str | None:
    """The furthest status WhatsApp reported for a message the bot sent, if any."""
    raw = await store.get(status_key(message_id))
    if raw is None:
        return None
    try:
        return str(json.loads(raw)["status"])
    except (ValueError, KeyError, TypeError):
        return None
