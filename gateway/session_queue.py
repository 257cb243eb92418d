"""The session queue: one turn at a time per session, workers, and the global concurrency cap.

Admission ends here (`enqueue`). Each session with waiting messages has one worker
task; it takes the session's lease (gateway/session_leases.py), waits for a global
slot and runs the turn (gateway/turns.py). A message that arrives while a turn runs
waits (with one notice) or interrupts it (`router.busy_mode`); it is never dropped
silently. `/stop` reaches a turn in another process over the store's control channel.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from dataclasses import dataclass, field

from gateway import keys
from gateway.admission import Admission, Notifier, Status, Submission
from gateway.config import RouterSettings
from gateway.group_context import GroupContext
from gateway.messages import UserRef
from gateway.metrics import Metrics
from gateway.outcome import TurnOutcome
from gateway.session_leases import SessionLeases, TurnLease
from gateway.sessions import SessionKey
from gateway.store.base import Store
from gateway.tasks import stop_task, stop_tasks
from gateway.turns import TurnJob, TurnRunner

log = logging.getLogger(__name__)

QUEUED_NOTICE = "Got it. I will answer this after the current request."
TURN_FAILED = "Something went wrong on my side while answering; please try again."


@dataclass
class _Waiting:
    job: TurnJob
    done: asyncio.Future[TurnOutcome]


@dataclass
class _Session:
    key: SessionKey
    queue: deque[_Waiting] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[TurnOutcome] | None = None
    running: TurnJob | None = None  # the running (or just finished) turn
    answering: bool = False  # that turn's reply is being delivered; it is ending
    noticed: bool = False  # a queue notice was sent during the current turn
    waiting: _Waiting | None = None  # taken off the queue, waiting for the lease or a slot


@dataclass(frozen=True)
class StopResult:
    running_here: bool  # a turn was running in this process and was stopped
    dropped: int  # waiting messages dropped
    refused: bool = False  # the running turn is someone else's and the caller may not stop it


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
    ) -> None:
        self._store = store
        self._runner = runner
        self._leases = leases
        self._context = context
        self._notifier = notifier
        self._settings = settings
        self._metrics = metrics
        self._instance = instance_id
        self._sessions: dict[SessionKey, _Session] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent_turns)
        self._control: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._control = asyncio.create_task(self._listen_control(), name="session control")

    async def stop(self) -> None:
        """Cancel running turns and wait for the workers to end (history is saved on cancel)."""
        await stop_task(self._control)
        await stop_tasks([s.worker for s in self._sessions.values() if s.worker is not None])

    # -- what admission and commands ask ---------------------------------------------------

    def idle_here(self, key: SessionKey) -> bool:
        session = self._sessions.get(key)
        return session is None or session.worker is None

    def is_running(self, key: SessionKey) -> bool:
        session = self._sessions.get(key)
        return bool(session and session.turn and not session.turn.done())

    def queue_length(self, key: SessionKey) -> int:
        session = self._sessions.get(key)
        return len(session.queue) if session else 0

    def waiting(self) -> int:
        """Messages waiting behind a running turn in this process (all sessions)."""
        return sum(len(session.queue) for session in self._sessions.values())

    def requester(self, key: SessionKey) -> UserRef | None:
        """Who asked for the turn running here, if one is."""
        session = self._sessions.get(key)
        if session is None or session.running is None or not self.is_running(key):
            return None
        return session.running.inbound.sender

    async def enqueue(self, admission: Admission) -> Submission:
        key = admission.session
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session(key)
        if len(session.queue) >= self._settings.max_queued_per_session:
            self._metrics.inc("refused_total", reason="queue_full")
            return await self._notifier.refuse(
                admission.inbound,
                f"{len(session.queue)} messages are already waiting in this conversation; "
                "wait for my answers, or send /stop to cancel them.",
                key,
            )
        busy = session.turn is not None and not session.turn.done()
        # The running turn is already sending its answer and nothing else waits: this
        # message starts in a moment, so a "will answer after" notice would only be noise.
        ending = session.answering and not session.queue
        lease = admission.intake.lease
        if lease is not None and session.worker is None:
            self._leases.adopt(lease)  # the turn starts right away, under that lease
        else:
            lease = None
        job = TurnJob(
            admission.inbound,
            key,
            admission.turn_id,
            lease=lease,
            record=admission.intake.record if lease is not None else None,
        )
        waiting = _Waiting(job, asyncio.get_running_loop().create_future())
        session.queue.append(waiting)
        status = Status.STARTED
        if busy or session.worker is not None:
            status = Status.QUEUED
            if self._settings.busy_mode == "interrupt" and session.turn is not None:
                session.turn.cancel()
            elif self._settings.queue_notice and not session.noticed and not ending:
                session.noticed = True
                await self._notifier.say(admission.inbound, QUEUED_NOTICE)
        if session.worker is None:
            session.worker = asyncio.create_task(self._work(session), name=f"session {key}")
        self._metrics.gauge("sessions_active", len(self._sessions))
        return Submission(status, waiting.done, key)

    async def stop_session(self, key: SessionKey, by: UserRef | None = None) -> StopResult:
        """Cancel the session's running turn (here or in another process) and drop its queue.

        With `by`, only that person's own turn is stopped unless they are allowed to stop
        anyone's (`by=None`); the control message carries the same check to other processes.
        """
        session = self._sessions.get(key)
        requester = self.requester(key)
        if by is not None and requester is not None and requester.address != by.address:
            return StopResult(False, 0, refused=True)
        dropped = 0
        running = False
        if session is not None:
            dropped = len(session.queue)
            while session.queue:
                _resolve(session.queue.popleft().done, TurnOutcome(cancelled=True))
            if session.waiting is not None and not session.waiting.done.done():
                _resolve(session.waiting.done, TurnOutcome(cancelled=True))
                dropped += 1
            turn = session.turn
            if turn is not None and not turn.done():
                turn.cancel()
                running = True
                # Let the cancelled turn save its history first, so a /new or /forget that
                # follows is not undone by that late save.
                await asyncio.wait({turn}, timeout=5)
        if not running:
            message = {"op": "stop", "session": str(key), "from": self._instance}
            if by is not None:
                message["by"] = by.address
            await self._store.publish(keys.CONTROL_CHANNEL, json.dumps(message))
        return StopResult(running, dropped)

    # -- workers -----------------------------------------------------------------------------

    async def _work(self, session: _Session) -> None:
        try:
            while session.queue:
                waiting = session.queue.popleft()
                session.running = None  # the previous turn's answer is out; this one waits
                session.answering = False
                session.waiting = waiting
                job = waiting.job
                async with (
                    self._leases.hold(job.key, job.turn_id, job.lease, job.record) as lease,
                    self._slots,
                ):
                    session.waiting = None
                    if waiting.done.done():  # dropped by /stop while it waited
                        continue
                    _resolve(waiting.done, await self._run_turn(session, waiting, lease))
        finally:
            session.worker = None
            if session.queue:  # a message arrived while we were finishing; keep going
                session.worker = asyncio.create_task(self._work(session))
            elif self._sessions.get(session.key) is session:
                del self._sessions[session.key]

    async def _run_turn(
        self, session: _Session, waiting: _Waiting, lease: TurnLease
    ) -> TurnOutcome:
        job = waiting.job
        context_lines = await self._context.take(job.inbound)
        session.noticed = False
        session.running = job

        def answering() -> None:
            session.answering = True

        session.turn = asyncio.create_task(
            self._runner.run(job, lease, context_lines=context_lines, on_answering=answering)
        )
        try:
            return await session.turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # The worker itself is being cancelled (shutdown), not just the turn.
                _resolve(waiting.done, TurnOutcome(cancelled=True))
                raise
            return TurnOutcome(cancelled=True)
        except Exception:
            log.exception("turn failed session=%s", session.key)
            await self._notifier.say(job.inbound, TURN_FAILED)
            return TurnOutcome(error=TURN_FAILED)
        finally:
            session.turn = None

    async def _listen_control(self) -> None:
        async for raw in self._store.listen(keys.CONTROL_CHANNEL):
            try:
                message = json.loads(raw)
                if message.get("op") == "stop" and message.get("from") != self._instance:
                    self._stop_from_elsewhere(SessionKey.parse(message["session"]), message)
            except (ValueError, KeyError):
                log.warning("bad control message ignored")

    def _stop_from_elsewhere(self, key: SessionKey, message: dict[str, str]) -> None:
        session = self._sessions.get(key)
        if session is None or session.turn is None:
            return
        by = message.get("by")
        requester = self.requester(key)
        if by is not None and requester is not None and requester.address != by:
            log.info("stop refused session=%s by=%s", key, by)
            return
        session.turn.cancel()


def _resolve(future: asyncio.Future[TurnOutcome], outcome: TurnOutcome) -> None:
    if not future.done():
        future.set_result(outcome)
