"""Webhook updates written down as received, answered 200, and read afterwards.

Telegram waits for the answer to a webhook call, and sends the call again when none comes
within its timeout. Reading an update into python-telegram-bot's objects and through
admission costs a few milliseconds; under a burst that made the answers wait in line behind
one another. So a call is answered as soon as its raw update is in the store (the hash
`telegram:received`, update id -> owner, time and body), and the updates are read, normalized
and submitted afterwards, here, oldest first, in order within a chat.

An update leaves the hash only once admission took it (stored, answered, refused or dropped
it). A process that dies in between loses nothing: the next start of the embedded store, or
any replica on a shared store once the owner's heartbeat (`alive:{instance}`) has lapsed,
reads the update again; intake's dedupe on the event id drops it if the first process got as
far as storing it. A call Telegram sends again while the update is still here is answered
without writing it twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from telegram import Bot, Update

from gateway.sdk import Batch, Store, StoreUnavailable, crash_point, keys, parse_json, stop_tasks

log = logging.getLogger(__name__)

# Read this many updates at a time while webhook calls wait for their answer, and pause
# after each such batch: the calls come first, yet the backlog keeps moving.
BUSY_BATCH = 8
BUSY_PAUSE = 0.02
QUIET_BATCH = 64
# Updates received and not yet read, past which a call is answered 503 (Telegram sends it
# again later) instead of growing the backlog without bound under sustained overload.
MAX_BACKLOG = 20_000
# A webhook call counts as arriving in intake's load from its write until this long after:
# between the calls of a crowd (each answered in about a millisecond) intake stays busy, so
# turns keep giving way until the crowd has passed, not only while a write is in flight.
ARRIVAL_LINGER = 0.1
RETRY_PAUSE = 1.0  # before reading again an update the store could not take
SWEEP_EVERY = 10.0  # seconds between looks for updates a stopped process left


@dataclass(frozen=True)
class RawUpdate:
    """An update as its webhook call carried it: the body is read again only when processed."""

    update_id: int
    lane: str  # updates of one chat are processed in order
    body: str
    at: float  # when it was received (unix time): replays go oldest first

    def encode(self, owner: str) -> str:
        return f"{owner}\n{self.at!r}\n{self.body}"

    @classmethod
    def decode(cls, update_id: int, raw: str) -> tuple[str, RawUpdate]:
        """The owner and the update of a stored entry; ValueError when it is not one."""
        owner, at, body = raw.split("\n", 2)
        return owner, cls(update_id, lane_of(parse_json(body), update_id), body, float(at))


def lane_of(data: Any, update_id: int) -> str:
    """The chat an update belongs to, read from the raw JSON without building objects."""
    if isinstance(data, dict):
        for key in ("message", "edited_message", "channel_post", "edited_channel_post"):
            message = data.get(key)
            if isinstance(message, dict):
                return _chat_lane(message, update_id)
        query = data.get("callback_query")
        if isinstance(query, dict) and isinstance(query.get("message"), dict):
            return _chat_lane(query["message"], update_id)
    return f"u{update_id}"


def _chat_lane(message: dict[str, Any], update_id: int) -> str:
    chat = message.get("chat")
    chat_id = chat.get("id") if isinstance(chat, dict) else None
    return str(chat_id) if isinstance(chat_id, int) else f"u{update_id}"


class GroupWrite:
    """Writes of many webhook calls to one hash in one store round trip.

    A write waits for the one in flight to end; everything that arrived meanwhile then goes
    in one batch (one HSET on Redis, one transaction in the embedded store), so a crowd of
    calls costs a handful of round trips, not one each.
    """

    def __init__(self, store: Store, key: str) -> None:
        self._store = store
        self._key = key
        self._waiting: list[tuple[str, str, asyncio.Future[None]]] = []
        self._flushing = False

    async def hset(self, field: str, value: str) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((field, value, done))
        if not self._flushing:
            self._flushing = True
            asyncio.get_running_loop().call_soon(self._start_flush)
        await done

    def _start_flush(self) -> None:
        task = asyncio.get_running_loop().create_task(self._flush())
        task.add_done_callback(_log_failure)

    async def _flush(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                batch = Batch()
                for field, value, _ in group:
                    batch.hset(self._key, field, value)
                try:
                    await self._store.run(batch)
                except Exception as exc:  # every caller gets it: each answers 503
                    for _, _, done in group:
                        if not done.done():
                            done.set_exception(exc)
                    continue
                for _, _, done in group:
                    if not done.done():
                        done.set_result(None)
        finally:
            self._flushing = False


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("telegram received updates not written", exc_info=task.exception())


Take = Callable[[Update], Awaitable[bool]]


class IntakeGauge(Protocol):
    """How busy intake is (gateway/intake/load.py): webhook calls waiting for their answer
    count in it, so that turns, and the reading here, give way to them."""

    @property
    def busy(self) -> bool: ...

    def enter(self) -> None: ...

    def leave(self) -> None: ...


class ReceivedUpdates:
    """The webhook's updates between the answer to their call and admission."""

    def __init__(
        self,
        store: Store,
        bot: Bot,
        take: Take,
        *,
        instance_id: str,
        load: IntakeGauge,
    ) -> None:
        self._store = store
        self._bot = bot
        self._take = take
        self._owner = instance_id
        self._load = load
        self._writes = GroupWrite(store, keys.TELEGRAM_RECEIVED)
        self._backlog: deque[RawUpdate] = deque()
        self._held: set[int] = set()  # received here and not yet taken by admission
        # Chats whose next update the store could not take: theirs wait, in order, until
        # it is tried again (RETRY_PAUSE), so no later message of a chat overtakes it.
        self._stalled: dict[str, list[RawUpdate]] = {}
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def backlog(self) -> int:
        return len(self._held)

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._process(), name="telegram received updates"),
            asyncio.create_task(self._sweep(), name="telegram received sweeper"),
        ]

    async def stop(self) -> None:
        await stop_tasks(list(self._tasks))
        self._tasks = []

    # -- the acknowledgement path ----------------------------------------------------------

    def full(self) -> bool:
        return len(self._held) >= MAX_BACKLOG

    async def write(self, update: RawUpdate) -> bool:
        """Store the update; False when it was here already (Telegram sent the call again).
        Raises StoreUnavailable when the store did not take it."""
        if update.update_id in self._held:
            return False
        self._load.enter()
        try:
            await self._writes.hset(str(update.update_id), update.encode(self._owner))
        finally:
            asyncio.get_running_loop().call_later(ARRIVAL_LINGER, self._load.leave)
        return True

    def hand_over(self, update: RawUpdate) -> None:
        """Queue a stored update for processing (after its call was answered)."""
        if update.update_id in self._held:
            return
        self._held.add(update.update_id)
        self._backlog.append(update)
        self._wake.set()

    # -- after the answer -----------------------------------------------------------------

    async def _process(self) -> None:
        while True:
            if not self._backlog:
                self._wake.clear()
                await self._wake.wait()
                continue
            busy = self._load.busy
            size = BUSY_BATCH if busy else QUIET_BATCH
            batch = [self._backlog.popleft() for _ in range(min(size, len(self._backlog)))]
            try:
                await self._process_batch(batch)
            except Exception:  # a fault here must not stop reading; they stay stored
                log.exception("telegram received updates not processed count=%d", len(batch))
                self._put_back_later(batch)
            await asyncio.sleep(BUSY_PAUSE if busy else 0)

    async def _process_batch(self, batch: list[RawUpdate]) -> None:
        lanes: dict[str, list[RawUpdate]] = {}
        for update in batch:
            if update.lane in self._stalled:
                self._stalled[update.lane].append(update)
            else:
                lanes.setdefault(update.lane, []).append(update)
        taken: list[RawUpdate] = []

        async def run(lane: list[RawUpdate]) -> None:
            for index, update in enumerate(lane):
                if await self._take_raw(update):
                    taken.append(update)
                else:  # the rest of this chat waits too, in order
                    self._stall(update.lane, lane[index:])
                    return

        await asyncio.gather(*(run(lane) for lane in lanes.values()))
        if taken:
            await self._forget(taken)

    async def _take_raw(self, raw: RawUpdate) -> bool:
        crash_point("telegram_received")
        try:
            update = Update.de_json(parse_json(raw.body), self._bot)
        except (ValueError, TypeError, KeyError, AttributeError):
            # Checked on receipt (update_check.py); a stored entry written by hand is dropped.
            log.warning("telegram received update unreadable, dropped update=%d", raw.update_id)
            return True
        try:
            return await self._take(update)
        except Exception:  # a fault of this code, not of the store: reading it again would too
            log.exception("telegram received update failed, dropped update=%d", raw.update_id)
            return True

    async def _forget(self, taken: list[RawUpdate]) -> None:
        ids = [str(update.update_id) for update in taken]
        try:
            await self._store.hdel(keys.TELEGRAM_RECEIVED, *ids)
        except StoreUnavailable as exc:  # taken already: a replay is dropped as a repeat
            log.warning("telegram received updates not cleared count=%d error=%s", len(ids), exc)
        self._held.difference_update(update.update_id for update in taken)

    def _put_back_later(self, updates: list[RawUpdate]) -> None:
        """Read them again after a pause (intake's dedupe drops any that were taken)."""

        def again() -> None:
            self._backlog.extendleft(reversed(updates))
            self._wake.set()

        asyncio.get_running_loop().call_later(RETRY_PAUSE, again)

    def _stall(self, lane: str, updates: list[RawUpdate]) -> None:
        self._stalled[lane] = updates

        def again() -> None:
            # Ahead of the backlog: whatever of this chat is still there came after these.
            self._backlog.extendleft(reversed(self._stalled.pop(lane, [])))
            self._wake.set()

        asyncio.get_running_loop().call_later(RETRY_PAUSE, again)

    # -- updates a stopped process left ----------------------------------------------------

    async def _sweep(self) -> None:
        while True:
            try:
                await self.adopt_orphans()
            except StoreUnavailable as exc:
                log.warning("telegram received updates not checked error=%s", exc)
            await asyncio.sleep(SWEEP_EVERY)

    async def adopt_orphans(self) -> int:
        """Queue the stored updates whose process stopped before they were taken, oldest
        first; how many. On a store of its own (not shared) that is every update another
        run of the gateway left; on a shared one, those whose owner's heartbeat lapsed."""
        entries = await self._store.hgetall(keys.TELEGRAM_RECEIVED)
        # Only the owner is read first: under a burst most entries are this process's own.
        others = {
            field: raw for field, raw in entries.items() if raw.partition("\n")[0] != self._owner
        }
        owners = {raw.partition("\n")[0] for raw in others.values()}
        gone = {owner for owner in owners if not await self._alive(owner)}
        orphans: list[RawUpdate] = []
        for field, raw in others.items():
            if raw.partition("\n")[0] not in gone:
                continue
            try:
                update_id = int(field)
                if update_id not in self._held:
                    orphans.append(RawUpdate.decode(update_id, raw)[1])
            except ValueError:
                log.warning("unreadable telegram received entry dropped update=%s", field)
                await self._store.hdel(keys.TELEGRAM_RECEIVED, field)
        orphans.sort(key=lambda update: update.at)
        if not orphans:
            return 0
        batch = Batch()  # ours now: other replicas leave them to this one
        for update in orphans:
            batch.hset(keys.TELEGRAM_RECEIVED, str(update.update_id), update.encode(self._owner))
        await self._store.run(batch)
        log.warning(
            "telegram updates received by a process that stopped; processing them count=%d",
            len(orphans),
        )
        for update in orphans:
            self.hand_over(update)
        return len(orphans)

    async def _alive(self, owner: str) -> bool:
        if not self._store.shared:
            return False  # only one process opens a store of its own: this one
        return await self._store.get(keys.alive(owner)) is not None
