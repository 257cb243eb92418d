"""A turn's life: the states one run of a stored message passes through, and the named
transitions between them, each one store step that checks the run's fencing token.

    stored --claim--> claimed --start--> running --reply--> replied --commit--> committed
                         |                  |                  |
                         |                  +--commit----------+--> committed (no reply sent:
                         |                  |                  |    a re-run, a refusal, a stop)
                         |                  +--dead_letter-----+--> dead_lettered
                         +--release---------+------------------+--> released (retried, or
                                                                    handed over at shutdown)
    any state before the end --stale--> stale (another run took the session over)

`claim` is the store's intake, claim or finish-with-next (gateway/store/inbox.py): a run is
born claimed, or, when intake stored its message and took the lease in one step, moves from
stored to claimed with that step (gateway/sessions/stored.py). `start` is local. The others
are `TurnRun` methods, each one store step: `reply` is `claim_reply`, `commit` and
`dead_letter` are `finish`, `release` is `finish` without keeping the lease. A run found
stale (at a store step, or by the lease renewal) stops before its next effect: every later
transition and fenced write raises `StaleTurn` without touching the store.
"""

from __future__ import annotations

import enum
import json
from typing import Protocol

from gateway.sdk.messages import SentRef
from gateway.sessions.fencing import StaleTurn
from gateway.store.base import Batch, Store
from gateway.store.inbox import Claimed, FinishResult, HeldLease, InboxEntry
from gateway.store.search import SearchDoc

REPLY_TTL = 2 * 86400.0  # a re-run within this long finds the reply slot already claimed


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


class LeaseKeeper(Protocol):
    """What renews a run's lease (gateway/sessions/leases.py SessionLeases)."""

    ttl: float

    def stop_renewing(self, run: TurnRun) -> None: ...

    def stopped_stale(self, run: TurnRun, effect: str) -> None: ...


class TurnRun:
    """One run of a stored message: the claimed message, the history read with it, the
    fencing token its lease was taken with, and its state. Every effect of the run goes
    through here and is checked against the token in the same store step."""

    def __init__(
        self, store: Store, claimed: Claimed, keeper: LeaseKeeper, life: TurnLife | None = None
    ) -> None:
        self._store = store
        self.claimed = claimed
        self._keeper = keeper
        self.record = claimed.record  # the stored history (None: a new session)
        self.life = life or TurnLife()  # claimed: the store step that made this run took it
        if self.life.state is not TurnState.CLAIMED:
            raise IllegalTransition(f"a run begins claimed, not {self.life.state.value}")
        self.handing_over = False  # the process is stopping: leave the message for another
        self.result: FinishResult | None = None  # the finishing store step's answer
        self._stopped = False  # the stop was counted
        # The finishing store step is under way: its own answer says whether the run still
        # held the session, and a renewal that finds the lease gone meanwhile proves nothing
        # (the step releases it and moves the fence on).
        self.finishing = False
        # Later messages of the session this run took in (steered or merged): its commit
        # drops them with its own, so a crash before it leaves them for the re-run.
        self.absorbed: list[str] = []
        self._holds_reply = False  # this run claimed the message's reply slot: it sends

    @property
    def session(self) -> str:
        return self.claimed.session

    @property
    def token(self) -> int:
        return self.claimed.token

    @property
    def state(self) -> TurnState:
        return self.life.state

    @property
    def stale(self) -> bool:
        """Another run took the session over: this one does nothing more."""
        return self.life.state is TurnState.STALE

    def held(self) -> HeldLease:
        return HeldLease(self.claimed.session, self.claimed.owner, self.claimed.token)

    # -- transitions --------------------------------------------------------------------

    def start(self) -> None:
        """claimed -> running: a worker runs the turn (no store step)."""
        self.life.move("start")

    def mark_stale(self) -> None:
        """-> stale: another run took the session over (the renewal found the fence moved
        on, or a claim here took it from this stuck run); the next effect stops."""
        if self.life.may("stale"):
            self.life.move("stale")

    async def claim_reply(self) -> str | None:
        """running -> replied: claim the message's reply slot before anything is sent,
        checking the token in the same step: None means send now. When an earlier run
        claimed it, its record comes back and nothing may be sent; when this run is stale,
        StaleTurn. Asked again once claimed, it answers None without a store step.

        A run that holds the slot sends, even when it is found stale after the claim (by the
        renewal, or by the claim itself coming back only after a failover): the slot was
        taken while its token held, so the run that took over finds it taken and sends
        nothing, and this run's reply is the only one there can be."""
        if self._holds_reply:
            return None
        if self.stale:
            raise self._stop("reply")
        claim = await self._store.claim_reply(
            self.session,
            self.token,
            self.claimed.entry.id,
            json.dumps({"claimed_by": self.token}),
            REPLY_TTL,
        )
        if claim.status == "stale":
            raise self._stop("reply")
        if claim.status == "taken":
            return claim.existing
        self._holds_reply = True
        if self.life.may("reply"):  # not when found stale while the claim was under way
            self.life.move("reply")
        return None

    async def commit(
        self, writes: Batch, record: str | None, index: SearchDoc | None = None
    ) -> None:
        """-> committed: write the turn's history and search document, drop its message (and
        what it absorbed) and keep the lease for the session's next message (or release it),
        in one store step; nothing is written (StaleTurn) when another run took over."""
        await self._finish("commit", writes, record, index, tuple(self.absorbed))

    async def dead_letter(self, writes: Batch) -> None:
        """-> dead_lettered: drop the message from the inbox with `writes` (its dead-letter
        record) in one store step, history unchanged; StaleTurn when another run took over."""
        # What it absorbed stays: each of those messages runs as a turn of its own.
        await self._finish("dead_letter", writes, self.record, None, ())

    async def release(self) -> None:
        """-> released: hand the lease back with the message still pending, so another run
        (a claimer here or elsewhere) takes it at once; one store step. A run that already
        ended, or never may, is left as it is."""
        if not self.life.may("release"):
            return
        self.life.move("release")
        await self._store.finish(
            self.session,
            "",
            self.claimed.owner,
            Batch(),
            keep=False,
            lease_ttl=self._keeper.ttl,
            token=self.token,
        )

    # -- fenced effects that move no state (ToolContext.fence) ---------------------------

    async def check(self, effect: str) -> None:
        """Stop here (StaleTurn) when another run has taken the session over."""
        if self.stale or not await self._store.fenced_write(self.session, self.token, Batch()):
            raise self._stop(effect)

    async def write(self, writes: Batch, effect: str) -> None:
        """Run `writes` only while this run still holds the session, in one store step."""
        if self.stale or not await self._store.fenced_write(self.session, self.token, writes):
            raise self._stop(effect)

    async def record_reply(self, sent: SentRef, text: str) -> None:
        """Fill the claimed slot with what went out, so a re-run after a crash saves the
        conversation with it instead of counting the reply as lost."""
        record: dict[str, object] = {
            "message_id": sent.message_id,
            "text": text,
            "claimed_by": self.token,
        }
        if self.absorbed:
            record["absorbed"] = self.absorbed
        value = json.dumps(record, ensure_ascii=False)
        await self._store.record_reply(self.session, self.claimed.entry.id, value, REPLY_TTL)

    async def pending(self) -> list[InboxEntry]:
        """The session's stored messages, this run's own first."""
        return await self._store.pending(self.session)

    # -- inside -------------------------------------------------------------------------

    def _stop(self, effect: str) -> StaleTurn:
        """Mark the run stale (counted once) and say so."""
        self.mark_stale()
        if not self._stopped:
            self._stopped = True
            self._keeper.stopped_stale(self, effect)
        return StaleTurn(self.session, self.token, effect)

    async def _finish(
        self,
        transition: str,
        writes: Batch,
        record: str | None,
        index: SearchDoc | None,
        absorbed: tuple[str, ...],
    ) -> None:
        if self.stale:
            raise self._stop(transition)
        if not self.life.may(transition):
            raise IllegalTransition(f"{transition} from {self.life.state.value}")
        self.finishing = True
        try:
            self.result = await self._store.finish(
                self.claimed.session,
                self.claimed.entry.id,
                self.claimed.owner,
                writes,
                keep=True,
                lease_ttl=self._keeper.ttl,
                record=record,
                index=index,
                token=self.token,
                absorbed=absorbed,
            )
        finally:
            self.finishing = False
        if self.result.status != "next":  # nothing left to renew, whatever runs before let_go
            self._keeper.stop_renewing(self)
        if self.result.status == "lost":
            raise self._stop(transition)
        self.life.move(transition)
