"""A message on its way in: stored in its session's inbox by intake's one store step, with the
session's lease and a slot here when its turn can start at once. The ticket is the message's
`stored` state and says what became of it; `settle` gives back whatever was not used.

    reserve (a slot, a lease owner) -> store (stored; claimed when the lease came too)
        -> hand_over (a worker runs the claimed turn: it keeps the slot and the lease)
        -> settle   (a claimed turn nobody started: its slot freed, its lease released)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.sessions.leases import SessionLeases
from gateway.sessions.slots import Slots
from gateway.store.inbox import Claimed, IntakeResult
from gateway.turn.states import TurnLife, TurnRun, TurnState


@dataclass
class IntakeTicket:
    """One message on its way in (SessionQueue.intake): what the store said, and whether the
    message ended up queued for a turn (the caller sets `queued`)."""

    owner: str | None  # the lease owner a slot was reserved for; None: no room here now
    result: IntakeResult | None = None
    queued: bool = False
    life: TurnLife = field(default_factory=lambda: TurnLife(TurnState.STORED))
    run: TurnRun | None = None  # the run a worker took over (hand_over)

    @property
    def stored(self) -> IntakeResult:
        assert self.result is not None, "read inside `async with queue.intake(...)`"
        return self.result

    @property
    def claimed(self) -> Claimed | None:
        """The turn intake's store step took the lease for, not yet handed to a worker."""
        if self.run is not None or self.result is None:
            return None
        return self.result.claimed

    def took(self, result: IntakeResult) -> None:
        """The store step's answer (stored, or refused: a duplicate, a limit); claimed when
        it took the lease too."""
        self.result = result
        if result.claimed is not None:
            self.life.move("claim")

    def hand_over(self, leases: SessionLeases) -> TurnRun:
        """The claimed turn starts here now: its run keeps the reserved slot and the lease."""
        assert self.result is not None and self.result.claimed is not None and self.run is None
        self.run = leases.turn(self.result.claimed, self.life)
        return self.run

    async def settle(self, slots: Slots, leases: SessionLeases) -> bool:
        """Give back what no run took: the reserved slot, and the lease with the message
        left pending (released, so a claimer takes it at once). True when the lease was."""
        if self.owner is None or self.run is not None:
            return False  # nothing reserved, or a worker holds it all now
        slots.give()
        claimed = self.claimed
        if claimed is None:
            return False
        await leases.let_go(leases.turn(claimed, self.life))
        return True
