"""Admission: the ordered chain every message passes before it may start a turn.

`AdmissionPipeline.submit(inbound)` runs the middlewares in order (observe, access,
intake, rate limit, validation, commands, questions, fallback) and ends in the session
queue. Each middleware is `async (admission, call_next) -> Submission`, as in aiogram:
it answers the message itself or passes it on. The `Admission` value is frozen; a
stage that learns something passes a new value (`dataclasses.replace`), so no stage
changes what another has seen.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from gateway.intake.load import IntakeLoad
from gateway.runtime.metrics import Metrics
from gateway.sdk.messages import Inbound, Outbound, SentRef
from gateway.sdk.outcome import TurnOutcome
from gateway.sessions.key import SessionKey
from gateway.store.base import StoreUnavailable
from gateway.store.inbox import IntakeResult

log = logging.getLogger(__name__)

STORE_DOWN_EVERY = 300.0  # seconds between "storage unreachable" notices in one chat
STORE_DOWN = (
    "My storage is unreachable right now, so I could not take your message. "
    "Please send it again in a minute."
)


class Status(StrEnum):
    STARTED = "started"  # a turn began at once
    QUEUED = "queued"  # waiting behind a running turn
    COMMAND = "command"  # answered by a command
    DUPLICATE = "duplicate"  # this platform event was already handled
    REFUSED = "refused"  # access, size or queue limits; the person was told why
    UNAVAILABLE = "unavailable"  # the store is down: not taken, the platform may redeliver
    OBSERVED = "observed"  # a group message not addressed to the bot, kept as context
    ANSWERED = "answered"  # consumed as the answer to a question a running turn asked


@dataclass(frozen=True)
class Intake:
    """What the intake round trip to the store found out, handed down the chain."""

    rate_count: int | None = None  # messages of this person this minute (shared stores)
    # The message as stored in its session's inbox (None: a command, answered before
    # storing); when the session was idle here with room, it carries the turn to run now.
    stored: IntakeResult | None = None

    @property
    def turn_in_progress(self) -> bool:
        """A turn of this session runs now, here or in another process."""
        return self.stored is not None and self.stored.holder is not None


@dataclass(frozen=True)
class Admission:
    inbound: Inbound
    session: SessionKey
    turn_id: str
    intake: Intake = Intake()


@dataclass
class Submission:
    status: Status
    done: asyncio.Future[TurnOutcome]
    session: SessionKey | None = None


Next = Callable[[Admission], Awaitable[Submission]]
Middleware = Callable[[Admission, Next], Awaitable[Submission]]


def finished(
    status: Status, outcome: TurnOutcome | None = None, session: SessionKey | None = None
) -> Submission:
    """A submission whose outcome is already known (no turn runs for it)."""
    future: asyncio.Future[TurnOutcome] = asyncio.get_running_loop().create_future()
    future.set_result(outcome or TurnOutcome())
    return Submission(status, future, session)


class Notifier:
    """Says one line in the chat a message came from; a failed notice is logged, never raised."""

    def __init__(self, send: Callable[[Outbound], Awaitable[SentRef]]) -> None:
        self._send = send

    async def say(self, inbound: Inbound, text: str) -> SentRef | None:
        try:
            return await self._send(
                Outbound(chat=inbound.chat, text=text, reply_to=inbound.message_id)
            )
        except Exception as exc:
            log.warning("notice not delivered chat=%s error=%s", inbound.chat.address, exc)
            return None

    async def send(self, out: Outbound) -> SentRef | None:
        try:
            return await self._send(out)
        except Exception as exc:
            log.warning("message not delivered chat=%s error=%s", out.chat.address, exc)
            return None

    async def refuse(
        self, inbound: Inbound, reason: str | None, session: SessionKey | None = None
    ) -> Submission:
        outcome = TurnOutcome(error=reason or "refused")
        if reason:
            outcome.sent = await self.say(inbound, reason)
        return finished(Status.REFUSED, outcome, session)


class AdmissionPipeline:
    """Runs the middlewares in order; the last `call_next` hands the message to `end`."""

    def __init__(
        self,
        *,
        start: Callable[[Inbound], Admission],
        middlewares: Sequence[Middleware],
        end: Next,
        notifier: Notifier,
        metrics: Metrics,
        max_concurrent: int = 256,
        load: IntakeLoad | None = None,
    ) -> None:
        self._start = start
        self._load = load or IntakeLoad()  # read by the session queue: turns give way
        self._chain = chain(middlewares, end)
        self._notifier = notifier
        self._metrics = metrics
        self._store_down_told: dict[str, float] = {}
        # A crowd arriving at once would otherwise go through the middlewares in one pass of
        # the event loop: no turn could run until all of it was stored, and every message in
        # flight holds its admission's objects at once. bench/burst.py (10,000 at once, 1 s
        # model): answered in 44 s instead of 49, peak memory 143 MB instead of 227.
        self._room = asyncio.Semaphore(max_concurrent)

    async def submit(self, inbound: Inbound) -> Submission:
        """Accept a message from an adapter; returns with what happened to it as soon as it
        is stored (or refused), after the messages that came before it."""
        self._metrics.inc("messages_total", platform=inbound.chat.platform)
        try:
            with self._load.entered():
                async with self._room:
                    return await self._chain(self._start(inbound))
        except StoreUnavailable as exc:
            log.error("store unavailable on submit chat=%s error=%s", inbound.chat.address, exc)
            self._metrics.inc("refused_total", reason="store")
            # Told once in a while per chat: the platform may redeliver the message, and the
            # store cannot remember that it was said.
            now = time.monotonic()
            told = self._store_down_told.get(inbound.chat.address, -STORE_DOWN_EVERY)
            outcome = TurnOutcome(error=STORE_DOWN)
            if now - told >= STORE_DOWN_EVERY:
                self._store_down_told[inbound.chat.address] = now
                outcome.sent = await self._notifier.say(inbound, STORE_DOWN)
            return finished(Status.UNAVAILABLE, outcome)


def chain(middlewares: Sequence[Middleware], end: Next) -> Next:
    """The middlewares linked in order, ending in `end`."""
    linked = end
    for middleware in reversed(middlewares):
        linked = _bind(middleware, linked)
    return linked


def _bind(middleware: Middleware, call_next: Next) -> Next:
    async def step(admission: Admission) -> Submission:
        return await middleware(admission, call_next)

    step.__qualname__ = f"admission step {getattr(middleware, '__qualname__', middleware)!s}"
    return step
