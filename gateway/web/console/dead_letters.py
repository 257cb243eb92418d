"""The console's dead-letter page: messages set aside after failing every attempt
(sessions/dead_letters.py), read-only; `chatgate dead-letters retry|drop ID` acts on them."""

from __future__ import annotations

from typing import Any

from gateway.sessions.dead_letters import DeadLetters
from gateway.store.base import Store

SHOWN = 200
TEXT_CHARS = 300


async def dead_letter_rows(store: Store) -> dict[str, Any]:
    letters = await DeadLetters(store).list()
    rows = [
        {
            "id": letter.id,
            "session": letter.session,
            "at": letter.at,
            "attempts": letter.attempts,
            "reason": letter.reason,
            "text": letter.text()[:TEXT_CHARS],
        }
        for letter in reversed(letters[-SHOWN:])  # newest first
    ]
    return {"dead_letters": rows, "dead_letters_total": len(letters)}
