"""Turn pressure: how many more turns this process may start now, intake coming first.

While intake is busy (a crowd of webhook calls waiting to be stored and acknowledged) or the
event loop lags, intake starts no turn itself and the claimer keeps at most `floor` turns
running here: each turn started then would take the loop from the calls still waiting, and
Telegram sends again a call not answered within 10 s. The floor keeps the queue moving when
the pressure lasts, or when the lag is not of this process's making (a busy machine).
"""

from __future__ import annotations

from gateway.intake.load import IntakeLoad
from gateway.runtime.loop_lag import LoopLag

FLOOR_SHARE = 16  # the floor is this fraction of router.max_concurrent_turns (at least 1)


def pressure_floor(max_turns: int) -> int:
    return max(1, max_turns // FLOOR_SHARE)


class TurnPressure:
    def __init__(self, loop_lag: LoopLag, intake: IntakeLoad, floor: int) -> None:
        self._loop_lag = loop_lag
        self._intake = intake
        self.floor = floor

    @property
    def on(self) -> bool:
        """Intake is busy or the loop lags: turns give way."""
        return self._intake.busy or self._loop_lag.lagging

    def room(self, running: int, wanted: int) -> int:
        """How many of `wanted` more turns may start, with `running` holding slots here."""
        if not self.on:
            return wanted
        return max(0, min(wanted, self.floor - running))
