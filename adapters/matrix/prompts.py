"""Buttons on Matrix: each button of a message is a reaction key, kept in the store so any
replica turns a person's reaction into the ButtonPress it stands for.

The bot reacts to its own prompt with each key, so people answer with one click on an
existing reaction. Approval choices get the keys people expect (✅ once, 🔁 session,
❌ deny, ♾️ always); other buttons are numbered.
"""

from __future__ import annotations

import json
import logging

from gateway.sdk import Button, Store, StoreUnavailable, keys

log = logging.getLogger(__name__)

PROMPT_TTL = 7 * 86400.0  # seconds a prompt's reactions are understood
_BY_CHOICE = {"once": "✅", "session": "🔁", "deny": "❌", "always": "♾️"}
_NUMBERED = ("1️⃣", "2️⃣", "3️⃣", "4️⃣", "5️⃣", "6️⃣", "7️⃣", "8️⃣", "9️⃣")
_VARIATION = "\ufe0f"  # emoji presentation selector: some clients send keys without it


def reaction_keys(rows: tuple[tuple[Button, ...], ...]) -> dict[str, Button]:
    """Reaction key -> the button it presses, in the buttons' order."""
    found: dict[str, Button] = {}
    numbered = iter(_NUMBERED)
    for row in rows:
        for button in row:
            key = _BY_CHOICE.get(button.data.rsplit(":", 1)[-1])
            if key is None or key in found:
                key = next(numbered, None)
            if key is not None:
                found[key] = button
    return found


def legend(buttons: dict[str, Button]) -> str:
    """The line under a prompt that says which reaction does what (plain text)."""
    choices = " · ".join(f"{key} {button.label}" for key, button in buttons.items())
    return f"\n\nReact with {choices}."


class ReactionPrompts:
    def __init__(self, store: Store, platform: str) -> None:
        self._store = store
        self._platform = platform

    async def remember(self, message_id: str, buttons: dict[str, Button]) -> None:
        value = json.dumps({key: button.data for key, button in buttons.items()})
        try:
            await self._store.set(
                keys.platform_prompt(self._platform, message_id), value, ttl=PROMPT_TTL
            )
        except StoreUnavailable as exc:
            # The `/approve ID` line in the prompt still works.
            log.warning("prompt reactions not remembered message=%s error=%s", message_id, exc)

    async def pressed(self, message_id: str, key: str) -> str | None:
        """The button data a reaction `key` on `message_id` stands for, or None."""
        raw = await self._store.get(keys.platform_prompt(self._platform, message_id))
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        found = data.get(key) or data.get(key.rstrip(_VARIATION)) or data.get(key + _VARIATION)
        return found if isinstance(found, str) else None
