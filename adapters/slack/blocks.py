"""Block Kit for messages with buttons: a mrkdwn section plus one actions block per row.

Each button's `value` is the core's Button.data and its `action_id` is `cg:<n>`, unique
in the message as Slack requires; one listener for the `cg:` prefix receives every press.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gateway.sdk import Button

ACTION_PREFIX = "cg:"
SECTION_LIMIT = 3000  # characters in a section block's text
_LABEL_LIMIT = 75  # characters in a button's plain_text label
_ROW_LIMIT = 25  # elements in one actions block

Block = dict[str, Any]


def section(text: str) -> Block:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def message_blocks(text: str, rows: Sequence[Sequence[Button]]) -> list[Block]:
    """Blocks for `text` (already mrkdwn, at most SECTION_LIMIT) followed by the button rows."""
    if len(text) > SECTION_LIMIT:
        raise ValueError(f"section text is {len(text)} characters; the limit is {SECTION_LIMIT}")
    blocks = [section(text)] if text.strip() else []
    index = 0
    for row in rows:
        elements: list[Block] = []
        for button in row:
            elements.append(_button(button, f"{ACTION_PREFIX}{index}"))
            index += 1
        for start in range(0, len(elements), _ROW_LIMIT):
            blocks.append({"type": "actions", "elements": elements[start : start + _ROW_LIMIT]})
    return blocks


def _button(button: Button, action_id: str) -> Block:
    label = button.label if len(button.label) <= _LABEL_LIMIT else button.label[:74] + "…"
    element: Block = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label, "emoji": True},
        "value": button.data,
    }
    if button.style != "secondary":  # Slack's default look; it has no "secondary" style
        element["style"] = button.style
    return element
