"""The core's admission middlewares, in the order the composition root chains them.

observe -> access -> intake -> rate limit -> validate -> commands -> [questions] ->
[fallback] -> session queue. Slots in brackets hold what features registered through
`Extensions.add_middleware`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable

from gateway import keys
from gateway.access import RATE_LIMITED, AccessPolicy
from gateway.admission import (
    Admission,
    Intake,
    Next,
    Notifier,
    Status,
    Submission,
    chain,
    finished,
)
from gateway.config import RouterSettings
from gateway.extensions import CommandCall, Extensions, Slot
from gateway.group_context import GroupContext
from gateway.messages import ChatKind, Inbound, InboundKind
from gateway.metrics import Metrics
from gateway.outcome import TurnOutcome
from gateway.session_leases import SessionLeases
from gateway.sessions import SessionKey
from gateway.store.base import Batch, Store

log = logging.getLogger(__name__)

_COMMAND = re.compile(r"^/([A-Za-z][\w-]{0,31})(?:@(\S+))?(?:\s+(.*))?$", re.DOTALL)
EMPTY = "Your message was empty. Send some text."


def addressed(inbound: Inbound) -> bool:
    """Meant for the bot: a direct chat, a mention or reply to it, or a scheduled prompt."""
    return (
        inbound.kind is InboundKind.AGENT
        or inbound.chat.kind is ChatKind.DIRECT
        or inbound.mentioned
    )


def parse_command(text: str) -> tuple[str, str] | None:
    """(name, args) of a `/command args` message, the name lower-cased; None otherwise."""
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    return match.group(1).lower(), (match.group(3) or "").strip()


class Observe:
    """Group chatter not meant for the bot is never refused, rate limited or answered; it is
    kept as context for the next answer in that chat, when its sender may use the bot."""

    def __init__(
        self, access: AccessPolicy, store: Store, context: GroupContext, dedupe_ttl: float
    ) -> None:
        self._access = access
        self._store = store
        self._context = context
        self._dedupe_ttl = dedupe_ttl

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        if addressed(inbound):
            return await call_next(admission)
        if self._access.permits(inbound):
            seen = keys.seen(inbound.chat.platform, inbound.event_id)
            if await self._store.set(seen, "1", ttl=self._dedupe_ttl, only_if_absent=True):
                await self._context.remember(inbound)
        return finished(Status.OBSERVED, session=admission.session)


class AccessCheck:
    """The static rules: blocked, allow lists, the platforms' rules. Told once an hour."""

    def __init__(self, access: AccessPolicy, notifier: Notifier, metrics: Metrics) -> None:
        self._access = access
        self._notifier = notifier
        self._metrics = metrics

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        if inbound.kind is InboundKind.AGENT:  # scheduled jobs were checked when created
            return await call_next(admission)
        reason = self._access.refusal(inbound)
        if reason is None:
            return await call_next(admission)
        self._metrics.inc("refused_total", reason="access")
        notify = await self._access.tell_refusal(inbound)
        return await self._notifier.refuse(inbound, reason if notify else None)


class IntakeRoundTrip:
    """One store round trip per message: claim the platform event id (a repeat is dropped),
    count the rate limit, and take the session's lease with its history when the session
    looks idle (or, while a question may be pending, read who holds it)."""

    def __init__(
        self,
        *,
        store: Store,
        access: AccessPolicy,
        leases: SessionLeases,
        dedupe_ttl: float,
        idle_here: Callable[[SessionKey], bool],
        questions_pending: Callable[[], bool],
        metrics: Metrics,
    ) -> None:
        self._store = store
        self._access = access
        self._leases = leases
        self._dedupe_ttl = dedupe_ttl
        self._idle_here = idle_here
        self._questions_pending = questions_pending
        self._metrics = metrics

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound, key = admission.inbound, admission.session
        batch = Batch().set(
            keys.seen(inbound.chat.platform, inbound.event_id),
            "1",
            ttl=self._dedupe_ttl,
            only_if_absent=True,
        )
        counter = self._access.rate_counter(inbound)
        if counter is not None:
            batch.incr(counter, ttl=120)
        probe = self._leases.probe(
            key,
            admission.turn_id,
            idle_here=self._idle_here(key),
            want_holder=self._questions_pending(),
        )
        if probe is not None:
            batch.ops.extend(probe.ops.ops)
        results = await self._store.run(batch)
        first, rest = results[0], results[1:]
        count = rest.pop(0) if counter is not None else None
        lease, record, busy = probe.read(rest) if probe is not None else (None, None, False)
        try:
            if not first:
                self._metrics.inc("duplicates_total")
                log.info("duplicate event dropped event=%s", inbound.event_id)
                return finished(Status.DUPLICATE)
            intake = Intake(rate_count=count, lease=lease, record=record, busy_elsewhere=busy)
            return await call_next(dataclasses.replace(admission, intake=intake))
        finally:
            await self._leases.release_unadopted(lease)


class RateLimit:
    def __init__(self, access: AccessPolicy, notifier: Notifier, metrics: Metrics) -> None:
        self._access = access
        self._notifier = notifier
        self._metrics = metrics

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        if not self._access.over_limit(inbound, admission.intake.rate_count):
            return await call_next(admission)
        self._metrics.inc("refused_total", reason="rate")
        notify = await self._access.tell_rate_limit(inbound)
        return await self._notifier.refuse(inbound, RATE_LIMITED if notify else None)


class Validate:
    """Empty and oversized messages are refused with a reason, never passed to the model."""

    def __init__(self, settings: RouterSettings, notifier: Notifier) -> None:
        self._max_chars = settings.max_message_chars
        self._notifier = notifier

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound, key = admission.inbound, admission.session
        blank = not inbound.text.strip() and not inbound.attachments
        if inbound.kind is InboundKind.USER and blank:
            return await self._notifier.refuse(inbound, EMPTY, key)
        if len(inbound.text) > self._max_chars:
            return await self._notifier.refuse(
                inbound,
                f"Your message has {len(inbound.text):,} characters; the limit is "
                f"{self._max_chars:,}. Send it as a file or in smaller parts.",
                key,
            )
        return await call_next(admission)


class Commands:
    """Registered commands are answered here, without the model and without queueing."""

    def __init__(self, extensions: Extensions, notifier: Notifier, metrics: Metrics) -> None:
        self._extensions = extensions
        self._notifier = notifier
        self._metrics = metrics

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        if inbound.kind is not InboundKind.USER or inbound.attachments:
            return await call_next(admission)
        parsed = parse_command(inbound.text)
        command = self._extensions.command(parsed[0]) if parsed else None
        if parsed is None or command is None:
            return await call_next(admission)
        name, args = parsed
        self._metrics.inc("commands_total", command=command.name)
        reply = await command.handler(CommandCall(inbound, admission.session, name, args))
        outcome = TurnOutcome(reply=reply)
        if reply:
            outcome.sent = await self._notifier.say(inbound, reply)
        return finished(Status.COMMAND, outcome, admission.session)


class SlotMiddlewares:
    """Runs what features registered in one slot, in order, then the rest of the chain.

    The `questions` slot is consulted only while the session has a turn in progress here
    or in another process: an answer can only be for a question a turn is waiting on.
    """

    def __init__(
        self,
        extensions: Extensions,
        slot: Slot,
        running_here: Callable[[SessionKey], bool] | None = None,
    ) -> None:
        self._extensions = extensions
        self._slot = slot
        self._running_here = running_here

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        middlewares = self._extensions.middlewares(self._slot)
        if not middlewares or not self._wanted(admission):
            return await call_next(admission)
        return await chain(middlewares, call_next)(admission)

    def _wanted(self, admission: Admission) -> bool:
        if self._running_here is None:
            return True
        return admission.intake.busy_elsewhere or self._running_here(admission.session)
