"""Fencing a turn's effects: a run whose session lease was taken over stops before its next one.

Each take of a session lease bumps the session's fence in the store (gateway/store/inbox.py);
a turn holds the token it was taken with, and the store checks it in the same atomic step as
each effect. `StaleTurn` is what a run meets at its first effect after the take-over.
"""

from __future__ import annotations

from typing import Protocol

from gateway.store.base import Batch


class StaleTurn(BaseException):
    """This run's session lease was taken over by another run: it must stop at once and
    send or save nothing more. A BaseException, like a cancellation, so no `except
    Exception` on the way (a tool's error handling, say) can swallow it."""

    def __init__(self, session: str, token: int, effect: str) -> None:
        super().__init__(f"turn no longer holds session {session} (token {token}): {effect}")
        self.session = session
        self.token = token
        self.effect = effect


class TurnFence(Protocol):
    """What a turn's tools use to fence their own effects (ToolContext.fence)."""

    async def check(self, effect: str) -> None:
        """Raise StaleTurn when the run's token is stale (one store step)."""

    async def write(self, writes: Batch, effect: str) -> None:
        """Run `writes` (set / hset) only while the run's token holds, else raise StaleTurn."""
