"""Later messages that join a running turn: gathered before its first step
(`router.merge_window_ms`: quick follow-ups from the same person) and, with
`router.busy_mode = "steer"`, taken in at each step boundary, so the model reads them
before it goes on.

A message joins a turn only in memory; it stays in the session's inbox until the turn's commit
drops it with the turn's own message (TurnRun.absorbed), so a run that dies before then is
run again with it. Only a contiguous run of plain messages joins, in the order they came: a
message with files (its media is prepared by a turn of its own) or a scheduled prompt stops it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from gateway.llm.types import Message
from gateway.media.content import user_content
from gateway.runtime.faults import crash_point
from gateway.sdk.messages import ChatKind, Inbound, InboundKind
from gateway.store import keys
from gateway.store.base import Batch, StoreUnavailable
from gateway.store.inbox import InboxEntry
from gateway.turn.states import TurnRun

log = logging.getLogger(__name__)

MAX_JOINED = 20  # messages one turn takes in; the rest wait for turns of their own
MAX_MERGE_WAIT = 10.0  # seconds a turn waits for follow-ups, however fast they keep coming
JOINED_TTL = 2 * 86400.0  # as long as a re-run may find the message still stored
STEERED_NOTE = "[Sent while you were working on this request]"

Acknowledge = Callable[[Inbound], Awaitable[None]]


@dataclass(frozen=True)
class Waiting:
    """A stored message behind the turn's own."""

    entry_id: str
    inbound: Inbound


def decode_waiting(entries: Sequence[InboxEntry], head_id: str) -> list[Waiting]:
    """The session's stored messages after the turn's own, oldest first (one that does not
    decode is skipped: its own turn reports it)."""
    waiting: list[Waiting] = []
    for entry in entries:
        if entry.id == head_id:
            continue
        try:
            waiting.append(Waiting(entry.id, Inbound.model_validate_json(entry.payload)))
        except ValidationError:
            continue
    return waiting


def _joinable(inbound: Inbound) -> bool:
    return inbound.kind is InboundKind.USER and not inbound.attachments


def merged(head: Inbound, waiting: Sequence[Waiting], window: float) -> list[Waiting]:
    """The messages that start the turn with `head`: the same person's next ones in the
    session, each within `window` seconds of the one before."""
    if window <= 0 or not _joinable(head):
        return []
    chosen: list[Waiting] = []
    last = head.received_at
    for item in waiting:
        inbound = item.inbound
        if inbound.sender.address != head.sender.address or not _joinable(inbound):
            break
        if inbound.received_at - last > window:
            break
        chosen.append(item)
        last = inbound.received_at
    return chosen[:MAX_JOINED]


def steered(waiting: Sequence[Waiting], taken: Sequence[str], room: int) -> list[Waiting]:
    """The messages a running turn takes in now: those after what it took before, up to the
    first that cannot join."""
    done = set(taken)
    chosen: list[Waiting] = []
    for item in waiting:
        if item.entry_id in done:
            continue
        if not _joinable(item.inbound) or len(chosen) >= room:
            break
        chosen.append(item)
    return chosen


def as_message(head: Inbound, inbound: Inbound, *, steered: bool) -> Message:
    """A joined message as the user message the model reads."""
    text = user_content(inbound)  # in a group: "Name: text" already
    if inbound.sender.address != head.sender.address and inbound.chat.kind is ChatKind.DIRECT:
        text = f"{inbound.sender.label}: {text}"
    if steered:
        text = f"{STEERED_NOTE}\n{text}"
    return {"role": "user", "content": text}


@dataclass(frozen=True)
class Joined:
    """Messages that join a running turn, and who of them is not the turn's own person:
    what other people wrote is outside content for the turn's approvals."""

    messages: list[Message]
    others: tuple[str, ...] = ()  # their senders' labels


def _others(head: Inbound, chosen: Sequence[Waiting]) -> tuple[str, ...]:
    labels = (
        w.inbound.sender.label for w in chosen if w.inbound.sender.address != head.sender.address
    )
    return tuple(dict.fromkeys(labels))


class Steering:
    """One run's joined messages; `take` is called before each model call."""

    def __init__(
        self,
        lease: TurnRun,
        head: Inbound,
        *,
        steer: bool,
        merge_window: float,
        acknowledge: Acknowledge | None = None,
        on_gathered: Callable[[], None] | None = None,
    ) -> None:
        self._lease = lease
        self._head = head
        self._steer = steer
        self._window = merge_window
        self._acknowledge = acknowledge
        self._on_gathered = on_gathered
        self._first = Joined([])

    @property
    def active(self) -> bool:
        return self._steer or self._window > 0

    async def gather(self) -> None:
        """Before the first step: wait out the merge window for the same person's follow-ups,
        and (steering) take in what waits already, such as what a run that died took in."""
        try:
            await self._gather()
        finally:
            if self._on_gathered is not None:
                self._on_gathered()

    async def _gather(self) -> None:
        if not self.active:
            return
        head, lease = self._head, self._lease
        give_up = time.time() + MAX_MERGE_WAIT
        while True:
            waiting = await self._waiting()
            chosen = merged(head, waiting, self._window)
            last = max([head.received_at, *(w.inbound.received_at for w in chosen)])
            pause = min(last + self._window - time.time(), give_up - time.time())
            if self._window <= 0 or pause <= 0:
                break
            await asyncio.sleep(pause)
        if self._steer:
            chosen = steered(waiting, (), MAX_JOINED)
        chosen = await self._join(chosen)
        lease.absorbed.extend(w.entry_id for w in chosen)
        self._first = Joined(
            [as_message(head, w.inbound, steered=False) for w in chosen], _others(head, chosen)
        )
        if chosen:
            log.info("messages joined the turn session=%s count=%d", lease.session, len(chosen))

    async def take(self) -> Joined:
        """What the model reads next: the gathered messages first, then (steering) what came
        since the last step, each acknowledged to its sender."""
        if self._first.messages:
            first, self._first = self._first, Joined([])
            return first
        room = MAX_JOINED - len(self._lease.absorbed)
        if not self._steer or room <= 0:
            return Joined([])
        try:
            chosen = steered(await self._waiting(), self._lease.absorbed, room)
            chosen = await self._join(chosen)
        except StoreUnavailable as exc:  # the message waits for a turn of its own instead
            log.warning("steering skipped session=%s error=%s", self._lease.session, exc)
            return Joined([])
        if not chosen:
            return Joined([])
        self._lease.absorbed.extend(w.entry_id for w in chosen)
        crash_point("after_steered")
        log.info("messages steered in session=%s count=%d", self._lease.session, len(chosen))
        if self._acknowledge is not None:
            for item in chosen:
                await self._acknowledge(item.inbound)
        return Joined(
            [as_message(self._head, w.inbound, steered=True) for w in chosen],
            _others(self._head, chosen),
        )

    async def _join(self, chosen: list[Waiting]) -> list[Waiting]:
        """Mark the chosen messages taken in (an edit no longer replaces them, it follows as a
        message of its own), then read them again: an edit stored before the mark is what
        joins. StaleTurn when another run took the session over."""
        if not chosen:
            return []
        marks = Batch()
        for item in chosen:
            marks.set(keys.joined(item.entry_id), "1", ttl=JOINED_TTL)
        await self._lease.write(marks, "steer")
        now = {item.entry_id: item for item in await self._waiting()}
        return [now[item.entry_id] for item in chosen if item.entry_id in now]

    async def _waiting(self) -> list[Waiting]:
        return decode_waiting(await self._lease.pending(), self._lease.claimed.entry.id)
