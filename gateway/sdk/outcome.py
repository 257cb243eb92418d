"""What became of one message: answered, failed with a line for the person, or cancelled."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.sdk.messages import SentRef


@dataclass
class TurnOutcome:
    reply: str | None = None
    error: str | None = None  # the line shown to the user when the turn failed
    sent: SentRef | None = None
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled
