"""Slash commands waiting for their answer: the turn's replies go out as interaction followups.

A command's Inbound carries `i:<interaction id>` as its message id, so each reply the core
sends for it (`Outbound.reply_to`) names the interaction. A followup token lives 15 minutes;
after that, or after a restart, the marker is unknown and replies go to the channel instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import discord

from adapters.discord.normalize import INTERACTION_MARKER

# Discord's 15 minutes, less a margin so a send that starts in time also ends in time.
TOKEN_LIFETIME = 14 * 60.0


@dataclass
class PendingCommand:
    interaction: discord.Interaction[Any]
    expires: float
    answered: bool = False  # a followup went out (the "thinking…" state is over)

    @property
    def valid(self) -> bool:
        return time.monotonic() < self.expires


class InteractionReplies:
    def __init__(self) -> None:
        self._pending: dict[str, PendingCommand] = {}
        # Followup message id -> its command, so edits use the webhook while the token lives.
        self._messages: dict[str, PendingCommand] = {}

    def open(self, interaction: discord.Interaction[Any]) -> str:
        """Remember a deferred command; returns the marker its Inbound carries."""
        self._purge()
        marker = f"{INTERACTION_MARKER}{interaction.id}"
        self._pending[marker] = PendingCommand(interaction, time.monotonic() + TOKEN_LIFETIME)
        return marker

    def get(self, reply_to: str | None) -> PendingCommand | None:
        if not reply_to or not reply_to.startswith(INTERACTION_MARKER):
            return None
        pending = self._pending.get(reply_to)
        return pending if pending is not None and pending.valid else None

    def close(self, marker: str) -> PendingCommand | None:
        return self._pending.pop(marker, None)

    def sent(self, pending: PendingCommand, message_id: int) -> None:
        pending.answered = True
        self._messages[str(message_id)] = pending

    def for_message(self, message_id: str) -> PendingCommand | None:
        pending = self._messages.get(message_id)
        return pending if pending is not None and pending.valid else None

    def _purge(self) -> None:
        for table in (self._pending, self._messages):
            for key in [k for k, p in table.items() if not p.valid]:
                del table[key]
