"""The core's buttons as discord.py DynamicItems, so a press is routed even after a restart.

A button's custom_id is `cg:` + `Button.data` (at most 67 of Discord's 100 characters). The
registered template matches it on any message the bot ever sent, with no view kept in memory.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol, runtime_checkable

import discord

from gateway.sdk import Button, ButtonStyle

log = logging.getLogger(__name__)

PREFIX = "cg:"
MAX_ROWS = 5  # Discord: at most 5 action rows of 5 buttons
ROW_WIDTH = 5
LABEL_LIMIT = 80
_STYLES = {
    "primary": discord.ButtonStyle.primary,
    "danger": discord.ButtonStyle.danger,
    "secondary": discord.ButtonStyle.secondary,
}


@runtime_checkable
class PressTarget(Protocol):
    """What the client a press arrives on must offer (the gateway client does)."""

    async def on_button(self, interaction: discord.Interaction[Any], data: str) -> None: ...


class ActionButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=r"cg:(?P<data>.+)"
):
    def __init__(
        self, data: str, label: str, style: ButtonStyle = "secondary", row: int | None = None
    ) -> None:
        button: discord.ui.Button[discord.ui.View] = discord.ui.Button(
            label=label[:LABEL_LIMIT], style=_STYLES[style], custom_id=PREFIX + data
        )
        super().__init__(button, row=row)
        self.data = data

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> ActionButton:
        label = item.label if isinstance(item, discord.ui.Button) else None
        return cls(match["data"], label or "…")

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        client = interaction.client
        if isinstance(client, PressTarget):
            await client.on_button(interaction, self.data)


def build_view(rows: tuple[tuple[Button, ...], ...]) -> discord.ui.View:
    """Rows of core buttons as a view; rows wider than Discord allows wrap onto the next."""
    lines = [row[i : i + ROW_WIDTH] for row in rows for i in range(0, len(row), ROW_WIDTH)]
    if len(lines) > MAX_ROWS:
        dropped = sum(len(line) for line in lines[MAX_ROWS:])
        log.warning("discord allows %d button rows; %d button(s) dropped", MAX_ROWS, dropped)
    view = discord.ui.View(timeout=None)
    for number, line in enumerate(lines[:MAX_ROWS]):
        for button in line:
            view.add_item(ActionButton(button.data, button.label, button.style, row=number))
    return view
