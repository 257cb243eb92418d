"""Adaptive Cards for messages with buttons: the text, then one Action.Submit per button.

Each submit's data is `{"chatgate": Button.data}`; Teams posts it back as a message activity
whose `replyToId` is the card, which the adapter turns into a ButtonPress.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.teams.normalize import SUBMIT_KEY
from gateway.sdk import Button

CARD_TYPE = "application/vnd.microsoft.card.adaptive"
_STYLES = {"primary": "positive", "danger": "destructive"}


def button_card(text: str, rows: Sequence[Sequence[Button]]) -> dict[str, Any]:
    """An Adaptive Card attachment showing `text` (Markdown) with the buttons as actions."""
    body: list[dict[str, Any]] = []
    if text.strip():
        body.append({"type": "TextBlock", "text": text, "wrap": True})
    actions: list[dict[str, Any]] = []
    for row in rows:
        for button in row:
            action: dict[str, Any] = {
                "type": "Action.Submit",
                "title": button.label,
                "data": {SUBMIT_KEY: button.data},
            }
            if button.style in _STYLES:
                action["style"] = _STYLES[button.style]
            actions.append(action)
    return {
        "contentType": CARD_TYPE,
        "content": {
            "type": "AdaptiveCard",
            "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
            "version": "1.4",
            "body": body,
            "actions": actions,
        },
    }
