"""The core's admission middlewares, in the order the composition root chains them.

observe -> access -> validate -> rate limit (counted here) -> intake -> commands ->
[questions] -> [fallback] -> session queue. Slots in brackets hold what features
registered through `Extensions.add_middleware`.

Intake stores every message meant for a turn in its session's inbox before anything
else happens to it, so the platform is acknowledged only for what is stored (the adapter
acknowledges when `submit` returns). Commands are answered at once instead and only
claim their event id.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable

from gateway.config import RouterSettings
from gateway.intake.access import RATE_LIMITED, AccessPolicy
from gateway.intake.admission import (
    Admission,
    Intake,
    Next,
    Notifier,
    Status,
    Submission,
    chain,
    finished,
)
from gateway.intake.group_context import GroupContext
from gateway.intake.pairing import Pairing
from gateway.runtime.metrics import Metrics
from gateway.sdk.extensions import CommandCall, CommandReply, Extensions, Slot
from gateway.sdk.messages import ChatKind, Inbound, InboundKind
from gateway.sdk.outcome import TurnOutcome
from gateway.sessions.key import SessionKey
from gateway.sessions.queue import SessionQueue
from gateway.store import keys
from gateway.store.base import Batch, Store, StoreUnavailable

log = logging.getLogger(__name__)

_COMMAND = re.compile(r"^/([A-Za-z][\w-]{0,31})(?:@(\S+))?(?:\s+(.*))?$", re.DOTALL)
EMPTY = "Your message was empty. Send some text."
QUEUE_FULL = (
    "Too many of your messages are already waiting in this conversation; wait for my "
    "answers, or send /stop to cancel them."
)
OVERLOADED = "I have too much to answer right now; please send this again in a few minutes."


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
    """The static rules: blocked, allow lists, the platforms' rules. Told once an hour. With
    pairing (`access.unknown = "pair"`), a person the allow list does not name is let in by
    their sealed pairing grant, or given a code to ask for one."""

    def __init__(
        self,
        access: AccessPolicy,
        notifier: Notifier,
        metrics: Metrics,
        pairing: Pairing | None = None,
    ) -> None:
        self._access = access
        self._notifier = notifier
        self._metrics = metrics
        self._pairing = pairing

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        if inbound.kind is InboundKind.AGENT:  # scheduled jobs were checked when created
            return await call_next(admission)
        reason = self._access.refusal(inbound)
        if reason is None:
            return await call_next(admission)
        pairing = self._pairing
        if pairing is not None and self._access.unlisted(inbound):
            if await pairing.paired(inbound.sender):
                reason = self._access.refusal(inbound, paired=True)
                if reason is None:
                    return await call_next(admission)
            else:
                self._metrics.inc("refused_total", reason="pairing")
                return await self._notifier.refuse(inbound, await pairing.ask(inbound))
        self._metrics.inc("refused_total", reason="access")
        notify = await self._access.tell_refusal(inbound)
        return await self._notifier.refuse(inbound, reason if notify else None)


class IntakeRoundTrip:
    """One store round trip per message: claim the platform event id (a repeat is dropped),
    count the rate limit where replicas share it, and store the message in its session's
    inbox; when the session is idle here and a slot is free, take its lease too, so the
    turn starts without another round trip. Commands only claim and count."""

    def __init__(
        self,
        *,
        store: Store,
        access: AccessPolicy,
        queue: SessionQueue,
        notifier: Notifier,
        dedupe_ttl: float,
        metrics: Metrics,
    ) -> None:
        self._store = store
        self._access = access
        self._queue = queue
        self._notifier = notifier
        self._dedupe_ttl = dedupe_ttl
        self._metrics = metrics

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        seen = keys.seen(inbound.chat.platform, inbound.event_id)
        counter = self._access.rate_counter(inbound)
        if answered_inline(inbound):
            return await self._claim_only(admission, call_next, seen, counter)
        async with self._queue.intake(admission, seen=seen, rate_key=counter) as ticket:
            result = ticket.stored
            refusal = await self._refusal(admission, result.status)
            if refusal is not None:
                return refusal
            submission = await call_next(
                dataclasses.replace(
                    admission, intake=Intake(rate_count=result.rate_count, stored=result)
                )
            )
            ticket.queued = submission.status in (Status.STARTED, Status.QUEUED)
            if not ticket.queued:
                # Answered some other way after it was stored (a question's answer, ...).
                await self._store.remove_pending(str(admission.session), admission.turn_id)
            return submission

    async def _claim_only(
        self, admission: Admission, call_next: Next, seen: str, counter: str | None
    ) -> Submission:
        batch = Batch().set(seen, "1", ttl=self._dedupe_ttl, only_if_absent=True)
        if counter is not None:
            batch.incr(counter, ttl=120)
        results = await self._store.run(batch)
        if not results[0]:
            return self._duplicate(admission)
        count = results[1] if counter is not None else None
        if count is not None and self._access.over_limit(admission.inbound, count):
            return await self._rate_refusal(admission)
        return await call_next(dataclasses.replace(admission, intake=Intake(rate_count=count)))

    async def _refusal(self, admission: Admission, status: str) -> Submission | None:
        inbound = admission.inbound
        if status == "duplicate":
            return self._duplicate(admission)
        if status == "rate_limited":
            return await self._rate_refusal(admission)
        if status == "queue_full":
            self._metrics.inc("refused_total", reason="queue_full")
            return await self._notifier.refuse(inbound, QUEUE_FULL, admission.session)
        if status == "overloaded":
            self._metrics.inc("refused_total", reason="overloaded")
            return await self._notifier.refuse(inbound, OVERLOADED, admission.session)
        return None

    def _duplicate(self, admission: Admission) -> Submission:
        self._metrics.inc("duplicates_total")
        log.info("duplicate event dropped event=%s", admission.inbound.event_id)
        return finished(Status.DUPLICATE)

    async def _rate_refusal(self, admission: Admission) -> Submission:
        self._metrics.inc("refused_total", reason="rate")
        notify = await self._access.tell_rate_limit(admission.inbound)
        return await self._notifier.refuse(admission.inbound, RATE_LIMITED if notify else None)


def answered_inline(inbound: Inbound) -> bool:
    """Command-shaped messages are answered during admission, never stored for a turn."""
    return (
        inbound.kind is InboundKind.USER
        and not inbound.attachments
        and parse_command(inbound.text) is not None
    )


class RateLimit:
    """Counts in this process when it alone uses the store (replicas count during intake)."""

    def __init__(self, access: AccessPolicy, notifier: Notifier, metrics: Metrics) -> None:
        self._access = access
        self._notifier = notifier
        self._metrics = metrics

    async def __call__(self, admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        shared = self._access.rate_counter(inbound) is not None
        if shared or not self._access.over_limit(inbound, None):
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
        try:
            reply = await command.handler(CommandCall(inbound, admission.session, name, args))
        except StoreUnavailable:
            raise  # admission says the store is down, once, for every stage
        except Exception:
            log.exception("command failed command=%s chat=%s", command.name, inbound.chat.address)
            reply = f"Something went wrong running /{name}; please try again."
        text = reply.text if isinstance(reply, CommandReply) else reply
        follow_ups = reply.follow_ups if isinstance(reply, CommandReply) else ()
        outcome = TurnOutcome(reply=text)
        if text:
            outcome.sent = await self._notifier.say(inbound, text)
        for message in follow_ups:
            await self._notifier.send(message)
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
        return admission.intake.turn_in_progress or self._running_here(admission.session)
