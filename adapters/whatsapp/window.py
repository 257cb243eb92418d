"""The 24-hour customer-service window, per WhatsApp number, kept in the shared store.

WhatsApp takes free-form messages to a person only within 24 hours of the last message that
person sent; after that, only an approved template. Every replica records each inbound
message here (its time and id: the id is what a read receipt and the typing indicator
name), so whichever replica sends a reminder knows whether the window is open.
"""

from __future__ import annotations

import json
import time

from gateway.sdk import Store

WINDOW_SECONDS = 24 * 3600
# A send this close to the end of the window goes out as a template: the message could
# reach WhatsApp after the window closed.
_MARGIN = 60.0


def window_key(number: str) -> str:
    return f"whatsapp:window:{number}"


class CustomerWindows:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def opened(self, number: str, message_id: str, at: float) -> None:
        """`number` wrote message `message_id` at `at` (WhatsApp's timestamp). A redelivered
        older message does not move the window back."""
        last = await self.last(number)
        if last is not None and last[0] > at:
            return
        record = json.dumps({"at": at, "message_id": message_id})
        await self._store.set(window_key(number), record, ttl=WINDOW_SECONDS + 3600)

    async def last(self, number: str) -> tuple[float, str] | None:
        """(time, message id) of the number's last message, None when none is known."""
        raw = await self._store.get(window_key(number))
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            return float(record["at"]), str(record["message_id"])
        except (ValueError, KeyError, TypeError):
            return None

    async def is_open(self, number: str, now: float | None = None) -> bool:
        last = await self.last(number)
        now = time.time() if now is None else now
        return last is not None and now - last[0] < WINDOW_SECONDS - _MARGIN

    async def closed(self, number: str) -> None:
        """WhatsApp said the window is closed (error 131047): believe it over our record."""
        await self._store.delete(window_key(number))
