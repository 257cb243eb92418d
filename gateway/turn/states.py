"""A turn's life as a state machine: each run of a stored message moves through named
transitions, each one store step (or, for `start`, a local one), and nowhere else.

    stored --claim--> claimed --start--> running --reply--> replied --commit--> committed
                         |                  |                  |
                         |                  +--commit----------+--> committed (no reply sent:
                         |                  |                  |    a re-run, a stop)
                         |                  +--dead_letter-----+--> dead_lettered
                         +--release---------+------------------+--> released (retried, or
                                                                    handed over at shutdown)
    any state before the end --stale--> stale (another run took the session over)

`claim` is the store's intake, claim or finish-with-next (gateway/store/inbox.py): a run is
born claimed. `reply` is `claim_reply`, `commit` and `dead_letter` are `finish`, `release`
is `finish` without keeping the lease; each checks the run's fencing token in that step.
"""

from __future__ import annotations

import enum


class TurnState(enum.Enum):
    STORED = "stored"
    CLAIMED = "claimed"
    RUNNING = "running"
    REPLIED = "replied"
    COMMITTED = "committed"
    DEAD_LETTERED = "dead_lettered"
    RELEASED = "released"
    STALE = "stale"


ENDS = frozenset(
    {TurnState.COMMITTED, TurnState.DEAD_LETTERED, TurnState.RELEASED, TurnState.STALE}
)
_LIVE = frozenset(TurnState) - ENDS
_STARTED = frozenset({TurnState.RUNNING, TurnState.REPLIED})

# transition -> (the states it may leave, the state it enters)
TRANSITIONS: dict[str, tuple[frozenset[TurnState], TurnState]] = {
    "claim": (frozenset({TurnState.STORED}), TurnState.CLAIMED),
    "start": (frozenset({TurnState.CLAIMED}), TurnState.RUNNING),
    "reply": (frozenset({TurnState.RUNNING}), TurnState.REPLIED),
    "commit": (_STARTED, TurnState.COMMITTED),
    "dead_letter": (_STARTED, TurnState.DEAD_LETTERED),
    "release": (frozenset({TurnState.CLAIMED}) | _STARTED, TurnState.RELEASED),
    "stale": (_LIVE, TurnState.STALE),
}


class IllegalTransition(RuntimeError):
    """A transition asked of a run in a state it may not leave that way: a bug."""


class TurnLife:
    """One run's state; `move` is the only way it changes."""

    def __init__(self, state: TurnState = TurnState.CLAIMED) -> None:
        self.state = state

    @property
    def ended(self) -> bool:
        return self.state in ENDS

    def may(self, transition: str) -> bool:
        return self.state in TRANSITIONS[transition][0]

    def move(self, transition: str) -> TurnState:
        leaves, enters = TRANSITIONS[transition]
        if self.state not in leaves:
            raise IllegalTransition(f"{transition} from {self.state.value}")
        self.state = enters
        return enters
