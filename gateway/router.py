"""The session router: one turn at a time per session, across every process sharing the store.

`submit()` never blocks on a turn. It checks access, drops duplicate platform
events, answers built-in commands at once, and queues everything else on its
session. A per-session worker takes the session's lease in the store (so two
replicas never run the same session at once), waits for a global concurrency
slot, and runs the turn. Nothing is dropped silently: each message is answered,
queued with a notice, or refused with a reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum

from gateway.access import AccessDecision, AccessPolicy
from gateway.channels import Outbox
from gateway.config import RouterSettings, SessionsSettings
from gateway.messages import ChatKind, Inbound, InboundKind, Outbound, SentRef
from gateway.metrics import Metrics
from gateway.session_leases import LeaseProbe, SessionLeases
from gateway.sessions import SessionKey, key_for
from gateway.store.base import Store, StoreUnavailable
from gateway.tasks import stop_task, stop_tasks
from gateway.turns import TurnOutcome, TurnRequest, TurnRunner

log = logging.getLogger(__name__)

CONTROL_CHANNEL = "control"
_COMMAND = re.compile(r"^/([A-Za-z][\w-]{0,31})(?:@(\S+))?(?:\s+(.*))?$", re.DOTALL)


class Status(StrEnum):
    STARTED = "started"  # a turn began at once
    QUEUED = "queued"  # waiting behind a running turn
    COMMAND = "command"  # answered by a built-in command
    DUPLICATE = "duplicate"  # this platform event was already handled
    REFUSED = "refused"  # access, size or queue limits; the person was told why
    OBSERVED = "observed"  # a group message not addressed to the bot, kept as context
    ANSWERED = "answered"  # consumed as the answer to a question a running turn asked


@dataclass
class Submission:
    status: Status
    done: asyncio.Future[TurnOutcome]
    session: SessionKey | None = None


@dataclass(frozen=True)
class CommandCall:
    inbound: Inbound
    session: SessionKey
    name: str
    args: str


CommandHandler = Callable[[CommandCall], Awaitable[str | None]]

# Sees an addressed message before it is queued; returns True when it consumed it
# (e.g. the typed answer to a question a running turn is waiting for).
Interceptor = Callable[[Inbound, SessionKey], Awaitable[bool]]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    handler: CommandHandler
    aliases: tuple[str, ...] = ()
    # Commands like /stop must act on a running turn, so they jump the queue.


@dataclass
class _Job:
    request: TurnRequest
    done: asyncio.Future[TurnOutcome]


@dataclass
class _Session:
    key: SessionKey
    queue: deque[_Job] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[TurnOutcome] | None = None
    current: TurnRequest | None = None  # the running (or just finished) turn's request
    noticed: bool = False  # a queue notice was sent during the current turn
    waiting: _Job | None = None  # taken off the queue, waiting for the lease or a slot


class Router:
    def __init__(
        self,
        *,
        store: Store,
        runner: TurnRunner,
        outbox: Outbox,
        access: AccessPolicy,
        settings: RouterSettings,
        sessions: SessionsSettings,
        metrics: Metrics,
        group_context: int = 20,
    ) -> None:
        self._store = store
        self._runner = runner
        self._outbox = outbox
        self._access = access
        self._settings = settings
        self._isolation = sessions
        self._metrics = metrics
        self._group_context = group_context
        self._sessions: dict[SessionKey, _Session] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent_turns)
        self._commands: dict[str, Command] = {}
        self._interceptors: list[Interceptor] = []
        self._answer_interceptors: list[Interceptor] = []
        self._instance = uuid.uuid4().hex[:10]
        self._leases = SessionLeases(store, self._instance, settings.lease_ttl)
        self._control: asyncio.Task[None] | None = None

    # -- public API ------------------------------------------------------------------

    def add_command(self, command: Command) -> None:
        for name in (command.name, *command.aliases):
            self._commands[name] = command

    def add_interceptor(self, interceptor: Interceptor) -> None:
        self._interceptors.append(interceptor)

    def add_answer_interceptor(self, interceptor: Interceptor) -> None:
        """An interceptor for answers to a question a running turn asked (clarify): it is
        consulted only while the session has a turn in progress, here or in another
        process, so ordinary messages cost it nothing."""
        self._answer_interceptors.append(interceptor)

    @property
    def commands(self) -> list[Command]:
        return list({id(c): c for c in self._commands.values()}.values())

    def session_key(self, inbound: Inbound) -> SessionKey:
        if inbound.session is not None:
            return SessionKey.parse(inbound.session)
        return key_for(inbound, self._isolation.for_platform(inbound.chat.platform))

    async def start(self) -> None:
        self._control = asyncio.create_task(self._listen_control(), name="router control")

    async def stop(self) -> None:
        """Cancel running turns and wait for the workers to end (history is saved on cancel)."""
        await stop_task(self._control)
        await stop_tasks([s.worker for s in self._sessions.values() if s.worker is not None])

    def queue_length(self, key: SessionKey) -> int:
        session = self._sessions.get(key)
        return len(session.queue) if session else 0

    def is_running(self, key: SessionKey) -> bool:
        session = self._sessions.get(key)
        return bool(session and session.turn and not session.turn.done())

    async def submit(self, inbound: Inbound) -> Submission:
        """Accept a message from an adapter; returns at once with what happened to it."""
        self._metrics.inc("messages_total", platform=inbound.chat.platform)
        try:
            return await self._submit(inbound)
        except StoreUnavailable as exc:
            log.error("store unavailable on submit chat=%s error=%s", inbound.chat.address, exc)
            return await self._refuse(
                inbound,
                "My storage is unreachable right now, so I could not take your message. "
                "Please send it again in a minute.",
            )

    async def stop_session(self, key: SessionKey) -> tuple[bool, int]:
        """Cancel the running turn (here or in another process) and drop the queue.

        Returns (a turn was running here, queued messages dropped).
        """
        session = self._sessions.get(key)
        dropped = 0
        running = False
        if session is not None:
            dropped = len(session.queue)
            while session.queue:
                job = session.queue.popleft()
                _resolve(job.done, TurnOutcome(cancelled=True))
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
            await self._store.publish(
                CONTROL_CHANNEL,
                json.dumps({"op": "stop", "session": str(key), "from": self._instance}),
            )
        return running, dropped

    # -- submission --------------------------------------------------------------------

    async def _submit(self, inbound: Inbound) -> Submission:
        if not self._addressed(inbound):
            # Group chatter not meant for the bot: never refused, rate limited or answered;
            # kept as context when the sender may use the bot.
            if self._access.permits(inbound) and await self._first_time(inbound):
                await self._remember_context(inbound)
            return Submission(Status.OBSERVED, _done(TurnOutcome()), self.session_key(inbound))
        key = self.session_key(inbound)
        session = self._sessions.get(key)
        probe = self._leases.probe(
            key,
            idle_here=session is None or session.worker is None,
            want_holder=bool(self._answer_interceptors),
        )
        decision = await self._access.check(
            inbound,
            dedupe=(self._dedupe_key(inbound), self._settings.dedupe_ttl),
            also=probe.batch if probe else None,
        )
        if probe is not None:
            probe.read(decision.also_results)
        try:
            return await self._admit(inbound, key, decision, probe)
        finally:
            await self._leases.drop(probe)

    async def _admit(
        self, inbound: Inbound, key: SessionKey, decision: AccessDecision, probe: LeaseProbe | None
    ) -> Submission:
        if decision.duplicate:
            self._metrics.inc("duplicates_total")
            log.info("duplicate event dropped event=%s", inbound.event_id)
            return Submission(Status.DUPLICATE, _done(TurnOutcome()))
        if not decision.allowed:
            self._metrics.inc("refused_total", reason="access")
            return await self._refuse(inbound, decision.reason if decision.notify else None)
        if inbound.kind is InboundKind.AGENT and not await self._first_time(inbound):
            return Submission(Status.DUPLICATE, _done(TurnOutcome()))
        if inbound.kind is InboundKind.USER and not inbound.attachments:
            if not inbound.text.strip():
                return await self._refuse(inbound, "Your message was empty. Send some text.", key)
            command = self._parse_command(inbound.text)
            if command is not None:
                return await self._run_command(inbound, key, *command)
        if len(inbound.text) > self._settings.max_message_chars:
            return await self._refuse(
                inbound,
                f"Your message has {len(inbound.text):,} characters; the limit is "
                f"{self._settings.max_message_chars:,}. Send it as a file or in smaller parts.",
                key,
            )
        interceptors = list(self._interceptors)
        if self.is_running(key) or (probe is not None and probe.busy_elsewhere):
            interceptors += self._answer_interceptors
        for interceptor in interceptors:
            if await interceptor(inbound, key):
                return Submission(Status.ANSWERED, _done(TurnOutcome()), key)
        return await self._enqueue(inbound, key, probe)

    def _dedupe_key(self, inbound: Inbound) -> str:
        return f"seen:{inbound.chat.platform}:{inbound.event_id}"

    async def _first_time(self, inbound: Inbound) -> bool:
        return await self._store.set(
            self._dedupe_key(inbound), "1", ttl=self._settings.dedupe_ttl, only_if_absent=True
        )

    def _addressed(self, inbound: Inbound) -> bool:
        return (
            inbound.kind is InboundKind.AGENT
            or inbound.chat.kind is ChatKind.DIRECT
            or inbound.mentioned
        )

    def _parse_command(self, text: str) -> tuple[Command, str, str] | None:
        match = _COMMAND.match(text.strip())
        if match is None:
            return None
        name, _bot, args = match.group(1).lower(), match.group(2), (match.group(3) or "").strip()
        command = self._commands.get(name)
        if command is None:
            return None
        return command, name, args

    async def _run_command(
        self, inbound: Inbound, key: SessionKey, command: Command, name: str, args: str
    ) -> Submission:
        self._metrics.inc("commands_total", command=command.name)
        reply = await command.handler(CommandCall(inbound, key, name, args))
        outcome = TurnOutcome(reply=reply)
        if reply:
            outcome.sent = await self._say(inbound, reply)
        return Submission(Status.COMMAND, _done(outcome), key)

    async def _refuse(
        self, inbound: Inbound, reason: str | None, key: SessionKey | None = None
    ) -> Submission:
        outcome = TurnOutcome(error=reason or "refused")
        if reason:
            outcome.sent = await self._say(inbound, reason)
        return Submission(Status.REFUSED, _done(outcome), key)

    async def _say(self, inbound: Inbound, text: str) -> SentRef | None:
        try:
            return await self._outbox.send(
                Outbound(chat=inbound.chat, text=text, reply_to=inbound.message_id)
            )
        except Exception as exc:
            log.warning("notice not delivered chat=%s error=%s", inbound.chat.address, exc)
            return None

    async def _remember_context(self, inbound: Inbound) -> None:
        if self._group_context <= 0 or not inbound.text.strip():
            return
        line = f"{inbound.sender.label}: {inbound.text[:500]}"
        await self._store.push(_context_key(inbound), line, max_len=self._group_context)

    async def _take_context(self, inbound: Inbound) -> list[str]:
        if self._group_context <= 0 or inbound.chat.kind is ChatKind.DIRECT:
            return []
        key = _context_key(inbound)
        lines = await self._store.list_range(key)
        if lines:
            await self._store.delete(key)
        return lines

    # -- queueing ----------------------------------------------------------------------

    async def _enqueue(
        self, inbound: Inbound, key: SessionKey, probe: LeaseProbe | None = None
    ) -> Submission:
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = _Session(key)
        busy = session.turn is not None and not session.turn.done()
        # The running turn is already sending its answer and nothing else waits: this
        # message starts in a moment, so a "will answer after" notice would only be noise.
        ending = bool(session.current and session.current.answering and not session.queue)
        if len(session.queue) >= self._settings.max_queued_per_session:
            self._metrics.inc("refused_total", reason="queue_full")
            return await self._refuse(
                inbound,
                f"{len(session.queue)} messages are already waiting in this conversation; "
                "wait for my answers, or send /stop to cancel them.",
                key,
            )
        loop = asyncio.get_running_loop()
        request = TurnRequest(inbound, key)
        if probe is not None and probe.held is not None and session.worker is None:
            probe.hand_to(request)  # the turn starts right away, under that lease
        job = _Job(request, loop.create_future())
        session.queue.append(job)
        status = Status.STARTED
        if busy or session.worker is not None:
            status = Status.QUEUED
            if self._settings.busy_mode == "interrupt" and session.turn is not None:
                session.turn.cancel()
            elif self._settings.queue_notice and not session.noticed and not ending:
                session.noticed = True
                await self._say(inbound, "Got it. I will answer this after the current request.")
        if session.worker is None:
            session.worker = asyncio.create_task(self._work(session), name=f"session {key}")
        self._metrics.gauge("sessions_active", len(self._sessions))
        return Submission(status, job.done, key)

    async def _work(self, session: _Session) -> None:
        try:
            while session.queue:
                job = session.queue.popleft()
                session.current = None  # the previous turn's answer is out; this one waits
                session.waiting = job
                async with self._leases.hold(session.key, job.request), self._slots:
                    session.waiting = None
                    if job.done.done():  # dropped by /stop while it waited
                        continue
                    _resolve(job.done, await self._run_turn(session, job))
        finally:
            session.worker = None
            if session.queue:  # a message arrived while we were finishing; keep going
                session.worker = asyncio.create_task(self._work(session))
            elif self._sessions.get(session.key) is session:
                del self._sessions[session.key]

    async def _run_turn(self, session: _Session, job: _Job) -> TurnOutcome:
        job.request.context_lines = await self._take_context(job.request.inbound)
        session.noticed = False
        session.current = job.request
        session.turn = asyncio.create_task(self._runner.run(job.request))
        try:
            return await session.turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # The worker itself is being cancelled (shutdown), not just the turn.
                _resolve(job.done, TurnOutcome(cancelled=True))
                raise
            return TurnOutcome(cancelled=True)
        except Exception:
            log.exception("turn failed session=%s", session.key)
            error = "Something went wrong on my side while answering; please try again."
            await self._say(job.request.inbound, error)
            return TurnOutcome(error=error)
        finally:
            session.turn = None

    async def _listen_control(self) -> None:
        async for raw in self._store.listen(CONTROL_CHANNEL):
            try:
                msg = json.loads(raw)
                if msg.get("op") == "stop" and msg.get("from") != self._instance:
                    key = SessionKey.parse(msg["session"])
                    session = self._sessions.get(key)
                    if session is not None and session.turn is not None:
                        session.turn.cancel()
            except (ValueError, KeyError):
                log.warning("bad control message ignored")


def _context_key(inbound: Inbound) -> str:
    return f"context:{inbound.chat.address}"


def _done(outcome: TurnOutcome) -> asyncio.Future[TurnOutcome]:
    future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
    future.set_result(outcome)
    return future


def _resolve(future: asyncio.Future[TurnOutcome], outcome: TurnOutcome) -> None:
    if not future.done():
        future.set_result(outcome)
