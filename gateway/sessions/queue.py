"""The session queue: turns for the messages intake stored, one at a time per session, run by
whichever process has room, under a global cap on turns running here.

Admission's intake stored the message in its session's pending list in the store
(gateway/store/inbox.py) and, when this process had a free slot and the session was idle,
took the session's lease in the same round trip: `enqueue` then starts the turn at once
(unless intake is busy or the loop lags: then turns give way to intake, see
gateway/sessions/pressure.py).
Otherwise the message waits in the store, holding no lease: the process running the
session takes it at the end of its turn, or a claimer (gateway/sessions/claimer.py; any process, as
slots free up) takes the oldest waiting session. A process that dies leaves its messages
pending; its leases expire within seconds and another process claims and runs them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from gateway.config import RouterSettings
from gateway.intake.admission import Admission, Notifier, Status, Submission
from gateway.intake.group_context import GroupContext
from gateway.intake.load import IntakeLoad
from gateway.runtime.faults import crash_point
from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_tasks
from gateway.sdk.messages import InboundKind, UserRef
from gateway.sdk.outcome import TurnOutcome
from gateway.sessions.claimer import Claimer
from gateway.sessions.dead_letters import (
    MAX_ATTEMPTS,
    DeadLetters,
    RunsEndedWithTheirProcess,
    set_aside,
)
from gateway.sessions.fencing import StaleTurn
from gateway.sessions.key import SessionKey
from gateway.sessions.leases import SessionLeases
from gateway.sessions.pressure import TurnPressure, pressure_floor
from gateway.sessions.slots import Slots
from gateway.sessions.stored import IntakeTicket
from gateway.store import keys
from gateway.store.base import Store, StoreUnavailable
from gateway.store.inbox import Claimed, InboxEntry, IntakeRequest, IntakeResult
from gateway.turn.runner import TurnJob, TurnRunner
from gateway.turn.states import TurnRun

log = logging.getLogger(__name__)

QUEUED_NOTICE = "Got it. I will answer this after the current request."
LIMIT_HIT = "Too many messages are waiting right now; please send this again in a few minutes."
GC_EVERY = 60.0
STATS_EVERY = 10.0  # seconds between queue gauges (depth, oldest wait)


@dataclass
class _Running:
    """A session whose turns run in this process now."""

    key: SessionKey
    lease: TurnRun | None = None
    job: TurnJob | None = None
    turn: asyncio.Task[TurnOutcome] | None = None
    answering: bool = False  # the current turn's reply is being delivered; it is ending
    gathering: bool = False  # the current turn waits out its merge window: messages join it
    worker: asyncio.Task[None] | None = None


@dataclass(frozen=True)
class StopResult:
    running_here: bool  # a turn was running in this process and was stopped
    dropped: int  # waiting messages dropped
    refused: bool = False  # the running turn is someone else's and the caller may not stop it


@dataclass
class _Waiter:
    future: asyncio.Future[TurnOutcome]
    since: float = field(default_factory=time.monotonic)


class SessionQueue:
    def __init__(
        self,
        *,
        store: Store,
        runner: TurnRunner,
        leases: SessionLeases,
        context: GroupContext,
        notifier: Notifier,
        settings: RouterSettings,
        metrics: Metrics,
        instance_id: str,
        turn_timeout: float,
        rate_limit: int = 0,
        intake_load: IntakeLoad | None = None,
    ) -> None:
        self._store = store
        self._runner = runner
        self._leases = leases
        self._context = context
        self._notifier = notifier
        self._settings = settings
        self._metrics = metrics
        self._instance = instance_id
        self._turn_timeout = turn_timeout
        self._slots = Slots(settings.max_concurrent_turns)
        self.dead_letters = DeadLetters(store)
        self._running: dict[SessionKey, _Running] = {}
        self._waiters: dict[str, _Waiter] = {}  # entry id -> its submitter, in this process
        load = intake_load or IntakeLoad()
        self._pressure = TurnPressure(
            leases.loop_lag, load, pressure_floor(settings.max_concurrent_turns)
        )
        self._claimer = Claimer(store, leases, self._slots, self._claimed, self._pressure)
        load.when_quiet(self._claimer.pressure_eased)
        # lease owner -> the ticket a slot was reserved for, while its message is on its way in
        self._tickets: dict[str, IntakeTicket] = {}
        self._rate_limit = rate_limit
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    async def start(self) -> None:
        await self._leases.start()
        self._tasks = [
            asyncio.create_task(self._listen_control(), name="session control"),
            asyncio.create_task(self._claimer.run(), name="session claimer"),
            asyncio.create_task(self._housekeeping(), name="session housekeeping"),
        ]

    async def stop(self) -> None:
        """Stop running turns and hand their messages back to the store for another process
        (or this one after a restart) to run; nothing is saved half-done."""
        self._stopping = True
        await stop_tasks(self._tasks)
        for running in self._running.values():
            if running.lease is not None:
                running.lease.handing_over = True
        await stop_tasks([r.worker for r in self._running.values() if r.worker is not None])
        for running in list(self._running.values()):
            # A worker cancelled before it ran never let its run go: hand the message back.
            if running.lease is not None:
                await self._leases.let_go(running.lease)
        await self._leases.stop()
        for waiter in self._waiters.values():
            _resolve(waiter.future, TurnOutcome(cancelled=True))

    # -- what admission and commands ask ---------------------------------------------------

    @contextlib.asynccontextmanager
    async def intake(
        self, admission: Admission, *, seen: str | None, rate_key: str | None = None
    ) -> AsyncIterator[IntakeTicket]:
        """Store the message in its session's inbox (gateway/store/inbox.py), taking the
        session's lease with it when its turn could start here at once (idle here, a slot
        free, the loop keeping up); the caller passes the ticket down to `enqueue` and says
        whether the message ended up queued. Leaving gives back whatever was not used: the
        slot and the lease of a turn `enqueue` did not start, the waiter of a message not
        queued after all.

        Whoever submitted the message can wait for its turn from the store step on: a turn
        may start in another task before this yields."""
        ticket = IntakeTicket(self._reserve(admission.session))
        if ticket.owner is not None:
            self._tickets[ticket.owner] = ticket
        try:
            result = await self.store(admission, seen=seen, rate_key=rate_key, owner=ticket.owner)
            ticket.took(result)
            yield ticket
        finally:
            if ticket.owner is not None:
                del self._tickets[ticket.owner]
            if not ticket.queued:
                self._waiters.pop(admission.turn_id, None)
            if await ticket.settle(self._slots, self._leases):
                self._claimer.more_waiting()

    def _reserve(self, key: SessionKey) -> str | None:
        """A lease owner token with a slot reserved for it, when a turn for this session could
        start here right away."""
        if self._stopping or key in self._running or self._pressure.on:
            # While intake is busy or the loop lags, intake only stores: the claimers start
            # turns, within the pressure floor until it eases (gateway/sessions/pressure.py).
            return None
        if not self._slots.take_now():
            return None
        return self._leases.new_owner()

    async def store(
        self,
        admission: Admission,
        *,
        seen: str | None,
        rate_key: str | None = None,
        owner: str | None = None,
    ) -> IntakeResult:
        """Store the message in its session's inbox; with `owner` (a slot reserved for it),
        take the session's lease too when it is free."""
        inbound = admission.inbound
        if admission.turn_id not in self._waiters:
            future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
            self._waiters[admission.turn_id] = _Waiter(future)
        request = IntakeRequest(
            session=str(admission.session),
            entry=InboxEntry(admission.turn_id, inbound.model_dump_json()),
            seen=seen,
            seen_ttl=self._settings.dedupe_ttl,
            max_queued=self._settings.max_queued_per_session,
            max_total=self._settings.max_pending_total,
            rate_key=rate_key,
            rate_limit=self._rate_limit,
            lease_owner=owner,
            lease_ttl=self._leases.ttl,
        )
        return await self._store.intake(request)

    @property
    def sessions_here(self) -> int:
        """Sessions whose turns run in this process now (their workers not yet finished)."""
        return len(self._running)

    def is_running(self, key: SessionKey) -> bool:
        running = self._running.get(key)
        return bool(running and running.turn and not running.turn.done())

    def requester(self, key: SessionKey) -> UserRef | None:
        """Who asked for the turn running here, if one is."""
        running = self._running.get(key)
        if running is None or running.job is None or not self.is_running(key):
            return None
        return running.job.inbound.sender

    async def waiting(self, key: SessionKey) -> int:
        """Messages stored for this session that wait behind the running turn."""
        pending = len(await self._store.pending(str(key)))
        busy = self.is_running(key) or await self._store.lease_owner(keys.session_lease(key))
        return max(pending - (1 if busy else 0), 0)

    async def enqueue(self, admission: Admission) -> Submission:
        """Admission's last step: the message is stored; start its turn, or say it waits."""
        result = admission.intake.stored
        if result is None:  # command-shaped but no command: a message for the model after all
            result = await self.store(admission, seen=None)
            if result.status != "stored":
                self._waiters.pop(admission.turn_id, None)
                return await self._notifier.refuse(admission.inbound, LIMIT_HIT, admission.session)
        key = admission.session
        log.debug(
            "message stored session=%s entry=%s queued=%d holder=%s starts=%s",
            key,
            admission.turn_id,
            result.queued,
            result.holder or "-",
            result.claimed is not None,
        )
        future = self._waiters[admission.turn_id].future
        crash_point("after_intake")
        # Claimed by intake's own store step: the turn starts here, on the ticket's slot.
        ticket = self._tickets.get(result.claimed.owner) if result.claimed is not None else None
        if ticket is not None and ticket.claimed is not None:
            self._start(ticket.hand_over(self._leases))
            return Submission(Status.STARTED, future, key)
        running = self._running.get(key)
        # A synthetic message (a scheduled prompt, a background task's report) never
        # interrupts a person's turn, nor tells them it waits.
        synthetic = admission.inbound.kind is not InboundKind.USER
        if result.holder is not None:
            if self._settings.busy_mode == "interrupt" and not synthetic:
                await self._interrupt(key, result.holder)
            elif self._settings.busy_mode == "steer":
                pass  # the running turn takes it in at its next step, or it runs right after
            else:
                # The running turn is already sending its answer and nothing else waits: this
                # message starts in a moment, so a "will answer after" notice would be noise.
                ending = running is not None and running.answering and result.queued <= 2
                # Between the store's answer and now, the running turn may have ended and this
                # message's own turn begun: then there is nothing to wait for.
                begun = future.done() or (
                    running is not None
                    and running.job is not None
                    and running.job.turn_id == admission.turn_id
                )
                # The running turn waits for this person's follow-ups: this one joins it.
                joins = (
                    running is not None
                    and running.gathering
                    and running.job is not None
                    and running.job.inbound.sender.address == admission.inbound.sender.address
                )
                ending = ending or begun or joins
                if result.notice and self._settings.queue_notice and not (ending or synthetic):
                    await self._notifier.say(admission.inbound, QUEUED_NOTICE)
        else:
            self._claimer.more_waiting()  # no room here now: claimed when a slot frees
        self._metrics.inc("messages_queued_total")
        return Submission(Status.QUEUED, future, key)

    async def stop_session(self, key: SessionKey, by: UserRef | None = None) -> StopResult:
        """Cancel the session's running turn (here or in another process) and drop what waits.

        With `by`, only that person's own turn is stopped unless they may stop anyone's
        (`by=None`); the control message carries the same check to other processes.
        """
        requester = self.requester(key)
        if by is not None and requester is not None and requester.address != by.address:
            return StopResult(False, 0, refused=True)
        running = self._running.get(key)
        turn = running.turn if running is not None else None
        here = turn is not None and not turn.done()
        busy = here or await self._store.lease_owner(keys.session_lease(key)) is not None
        entries = await self._store.pending(str(key))
        dropped = await self._store.drop_pending(str(key))
        if busy and dropped:
            dropped -= 1  # the running turn's own message
        running_id = running.job.turn_id if running is not None and running.job else None
        for entry in entries:
            waiter = self._waiters.pop(entry.id, None) if entry.id != running_id else None
            if waiter is not None:
                _resolve(waiter.future, TurnOutcome(cancelled=True))
        if turn is not None and here:
            turn.cancel()
            # Let the cancelled turn save its history first, so a /new or /forget that
            # follows is not undone by that late save.
            await asyncio.wait({turn}, timeout=5)
        else:
            message = {"op": "stop", "session": str(key), "from": self._instance}
            if by is not None:
                message["by"] = by.address
            await self._store.publish(keys.CONTROL_CHANNEL, json.dumps(message))
        return StopResult(here, dropped)

    # -- running turns -------------------------------------------------------------------

    def _start(self, run: TurnRun) -> None:
        """Run the session's turns here, starting with `run` (a slot is held for it)."""
        key = SessionKey.parse(run.session)
        running = self._running[key] = _Running(key, lease=run)
        running.worker = asyncio.create_task(self._work(running, run), name=f"session {key}")

    async def _work(self, running: _Running, first: TurnRun) -> None:
        lease: TurnRun | None = first
        last: tuple[str, TurnOutcome] | None
        try:
            while lease is not None:
                running.lease = lease
                claimed = lease.claimed
                if claimed.attempt > 1:
                    self._metrics.inc("turns_rerun_total")
                    log.warning(
                        "turn run again after its process stopped or its run failed "
                        "session=%s entry=%s attempt=%d",
                        claimed.session,
                        claimed.entry.id,
                        claimed.attempt,
                    )
                outcome = await self._run_turn(running, lease)
                result = lease.result
                if outcome is None:
                    # The message stays for another run: a retry after a failed attempt, or
                    # the run that took the session over (which answers whoever waits).
                    last = None
                    if not lease.stale:
                        self._claimer.more_waiting()
                    break
                for absorbed in lease.absorbed:  # answered by this turn's reply
                    self._answer(absorbed, outcome)
                if result is None or result.next is None or self._stopping:
                    last = (claimed.entry.id, outcome)
                    break
                self._answer(claimed.entry.id, outcome)
                # The commit kept the lease for the session's next message: its run.
                lease = self._leases.turn(result.next)
        finally:
            if lease is not None:
                await self._leases.let_go(lease)
            if self._running.get(running.key) is running:
                del self._running[running.key]
            self._slots.give()
            self._claimer.slot_freed()
        # Only now, with the session idle here and its slot free: whoever waited may send the
        # next message at once, and it starts straight from intake.
        if last is not None:
            self._answer(*last)

    def _answer(self, entry_id: str, outcome: TurnOutcome) -> None:
        waiter = self._waiters.pop(entry_id, None)
        if waiter is not None:
            _resolve(waiter.future, outcome)

    async def _run_turn(self, running: _Running, lease: TurnRun) -> TurnOutcome | None:
        """Run one turn; None when its message stays for another run (this one failed and
        may be tried again, or another run took the session over)."""
        job = TurnJob.from_claimed(lease.claimed)
        lease.start()
        running.job, running.answering = job, False
        if job.attempt > MAX_ATTEMPTS:
            # Every earlier run ended with its process (killed, out of memory, a crash that
            # raised nothing here): only the count of runs tells a message that kills its
            # process, and running it again would take this one down too.
            log.error("turn not run again: its process stopped in every run session=%s", job.key)
            stopped = RunsEndedWithTheirProcess(job.attempt - 1)
            return await set_aside(lease, job, stopped, self._notifier, self._metrics)
        running.gathering = self._settings.merge_window_ms > 0
        context_lines = [*job.inbound.context, *await self._context.take(job.inbound)]

        def answering() -> None:
            running.answering = True

        def gathered() -> None:
            running.gathering = False

        running.turn = asyncio.create_task(
            self._runner.run(
                job,
                lease,
                context_lines=context_lines,
                on_answering=answering,
                on_gathered=gathered,
            )
        )
        try:
            return await running.turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # the worker itself is being stopped (shutdown), not just the turn
            return TurnOutcome(cancelled=True)
        except StaleTurn:
            return None  # counted and logged where it stopped (gateway/sessions/leases.py)
        except Exception as exc:
            log.exception("turn failed session=%s attempt=%d", running.key, job.attempt)
            self._metrics.inc("turns_failed_total")
            if job.attempt < MAX_ATTEMPTS:
                return None  # handed back: a claimer runs it again
            return await set_aside(lease, job, exc, self._notifier, self._metrics)
        finally:
            running.turn, running.gathering = None, False

    def _claimed(self, found: Claimed) -> None:
        """Run a session the claimer took (a slot is held for it)."""
        stuck = self._running.get(SessionKey.parse(found.session))
        if stuck is not None and stuck.lease is not None:
            # Our own run's lease lapsed: this loop stalled past lease_stuck_after, or the
            # store was out of reach for a whole TTL. The claim moved the fence on, so that
            # run stops at its next effect; this one answers instead.
            stuck.lease.mark_stale()
            log.warning("session taken over from a stuck run here session=%s", stuck.key)
        if found.attempt > 1:
            self._metrics.inc("sessions_recovered_total")
        self._start(self._leases.turn(found))

    async def _housekeeping(self) -> None:
        collected = time.monotonic()
        while True:
            await asyncio.sleep(STATS_EVERY)
            try:
                pending, waited = await self._store.inbox_stats()
            except StoreUnavailable:
                continue
            self._metrics.gauge("queue_pending_messages", pending)
            self._metrics.gauge("queue_oldest_wait_seconds", round(waited, 3))
            self._metrics.gauge("turns_running", len(self._running))
            if time.monotonic() - collected >= GC_EVERY:
                collected = time.monotonic()
                # A submitter whose message another process ran is never resolved here.
                limit = time.monotonic() - self._turn_timeout
                for entry_id, waiter in list(self._waiters.items()):
                    if waiter.since < limit:
                        del self._waiters[entry_id]
                        _resolve(waiter.future, TurnOutcome(cancelled=True))

    async def _interrupt(self, key: SessionKey, holder: str) -> None:
        running = self._running.get(key)
        if running is not None and running.turn is not None:
            running.turn.cancel()
            return
        message = {"op": "stop", "session": str(key), "from": self._instance, "holder": holder}
        await self._store.publish(keys.CONTROL_CHANNEL, json.dumps(message))

    async def _listen_control(self) -> None:
        async for raw in self._store.listen(keys.CONTROL_CHANNEL):
            try:
                message = json.loads(raw)
                if message.get("op") == "stop" and message.get("from") != self._instance:
                    self._stop_from_elsewhere(SessionKey.parse(message["session"]), message)
            except (ValueError, KeyError):
                log.warning("bad control message ignored")

    def _stop_from_elsewhere(self, key: SessionKey, message: dict[str, str]) -> None:
        running = self._running.get(key)
        if running is None or running.turn is None:
            return
        by = message.get("by")
        requester = self.requester(key)
        if by is not None and requester is not None and requester.address != by:
            log.info("stop refused session=%s by=%s", key, by)
            return
        running.turn.cancel()


def _resolve(future: asyncio.Future[TurnOutcome], outcome: TurnOutcome) -> None:
    if not future.done():
        future.set_result(outcome)
