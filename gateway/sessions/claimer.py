"""The claimer: takes waiting sessions from the store whenever this process has free slots.

A message waits in the store with no lease when it was stored while no slot was free here,
when its lease was handed back (a failed attempt, a shutdown), when another process stored
it, or when its holder died or got stuck and the lease lapsed. The claimer takes as many of
the oldest such sessions at once as there are free slots, in one round trip, and hands each
to the queue to run. With nothing known to wait it sleeps until woken or the poll (lapsed
leases, other processes' messages), holding no slot, so new messages for idle sessions start
straight from intake; with a backlog it queues for the next free slot first. While intake is
busy or the event loop lags (gateway/sessions/pressure.py) it claims nothing while the
pressure floor's turns run here, and only up to that floor otherwise: more turns at once
would only starve intake and the turns running, and none at all would stop the queue when
the pressure lasts or the lag is not of this process's making (a busy machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from gateway.sessions.leases import SessionLeases
from gateway.sessions.pressure import TurnPressure
from gateway.sessions.slots import Slots
from gateway.store.base import Store, StoreUnavailable
from gateway.store.inbox import Claimed

log = logging.getLogger(__name__)

CLAIM_POLL = 1.0  # seconds between claims when nothing woke the claimer (expired leases)
CLAIM_BATCH = 32  # sessions one claim may take at most
PRESSURE_POLL = 0.25  # seconds between looks at the pressure while it holds claims back


class Backlog:
    """Whether a message is known to wait in the store with no lease, as this process knows.

    `more` says one may (stored with no room here, handed back, a full claim); a claim takes a
    `mark` as it starts and, when it came back short (nothing more waited then), `cleared`
    with that mark: known no more, unless `more` was said while the claim ran. It starts
    known, so a new process claims at once what an earlier one left."""

    def __init__(self) -> None:
        self._said = 1
        self._cleared_at = 0

    @property
    def known(self) -> bool:
        return self._said != self._cleared_at

    def more(self) -> None:
        self._said += 1

    def mark(self) -> int:
        return self._said

    def cleared(self, mark: int) -> None:
        self._cleared_at = mark


class Claimer:
    def __init__(
        self,
        store: Store,
        leases: SessionLeases,
        slots: Slots,
        run: Callable[[Claimed], None],
        pressure: TurnPressure,
    ) -> None:
        self._store = store
        self._leases = leases
        self._slots = slots
        self._pressure = pressure
        self._run = run  # starts the claimed turn; a slot is held for it
        self._wake = asyncio.Event()
        # While nothing is known to wait, a freed slot does not wake the claimer.
        self.backlog = Backlog()

    def more_waiting(self) -> None:
        """A message may wait in the store with no lease: claim it when a slot is free."""
        self.backlog.more()
        self._wake.set()

    def slot_freed(self) -> None:
        """A turn here ended: claim now, if anything is known to wait."""
        if self.backlog.known:
            self._wake.set()

    def pressure_eased(self) -> None:
        """Intake went quiet: claim now, if anything is known to wait."""
        self.slot_freed()

    async def _sleep(self, seconds: float) -> None:
        """Until woken, or `seconds` pass."""
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def run(self) -> None:
        while True:
            if not self.backlog.known:
                await self._sleep(CLAIM_POLL)
            # Intake first: while it is busy or the loop lags, wait for the pressure floor.
            while not self._pressure.room(self._slots.in_use, 1):
                await self._sleep(PRESSURE_POLL)
            await self._slots.take()
            batch = max(1, self._pressure.room(self._slots.in_use - 1, CLAIM_BATCH))
            wanted = 1 + self._slots.take_up_to(batch - 1)
            mark = self.backlog.mark()
            try:
                claimed = await self._store.claim(
                    self._leases.new_owner(), self._leases.ttl, limit=wanted
                )
            except StoreUnavailable as exc:
                self._slots.give(wanted)
                log.warning("claiming waiting sessions failed error=%s", exc)
                await asyncio.sleep(CLAIM_POLL)
                continue
            except BaseException:
                self._slots.give(wanted)
                raise
            for found in claimed:
                self._run(found)
            self._slots.give(wanted - len(claimed))
            if len(claimed) == wanted:
                # A full claim: more may wait, stored by other processes too (the backlog
                # counts only what this one stored), so claim again as slots free instead
                # of at the next poll. A replica that takes no messages itself (not the
                # Telegram poller, say) would otherwise help a crowd a batch a second.
                self.backlog.more()
            else:  # nothing more waited when the claim ran
                self.backlog.cleared(mark)
