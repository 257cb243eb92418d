"""Free-form messages kept for an hour after sending, so that one WhatsApp later reports as
failed with 131047 (the 24-hour window had closed: the Cloud API accepts the request and
says so in a status notification) goes again as the template, or is logged undeliverable."""

from __future__ import annotations

import json
from typing import Any

from gateway.sdk import HOUR, Store


def sent_key(message_id: str) -> str:
    return f"whatsapp:sent:{message_id}"


def readable_text(body: dict[str, Any]) -> str:
    """What a person would have read of a message body: its text, caption or question."""
    kind = str(body.get("type", ""))
    part = body.get(kind) or {}
    if kind == "text":
        return str(part.get("body", ""))
    if kind == "interactive":
        return str((part.get("body") or {}).get("text", ""))
    return str(part.get("caption", ""))


class SentMessages:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def remember(self, message_id: str, body: dict[str, Any]) -> None:
        text = readable_text(body)
        if message_id and text:
            record = json.dumps({"to": body.get("to", ""), "text": text})
            await self._store.set(sent_key(message_id), record, ttl=HOUR)

    async def take(self, message_id: str) -> tuple[str, str] | None:
        """(recipient, text) of a remembered message, once: a repeated status (or a second
        replica) finds nothing."""
        claimed = await self._store.set(
            sent_key(message_id) + ":taken", "1", ttl=HOUR, only_if_absent=True
        )
        raw = await self._store.get(sent_key(message_id)) if claimed else None
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            return str(record["to"]), str(record["text"])
        except (ValueError, KeyError, TypeError):
            return None
