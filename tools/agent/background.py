"""Sub-agents sent off in the background (`delegate(..., background=true)`): each runs outside
the turn that started it, and its report comes back to the chat as a message the agent
writes, through a turn of the same session, so the conversation's history holds it.

Each task is a record in the store (`keys.BACKGROUND_TASKS`), written when it starts and when
it ends; the process running it refreshes the record's heartbeat. A task whose process stops
is not resumed: a graceful stop marks it interrupted at once, a crash leaves a heartbeat that
goes stale, and either way the next sweep (any replica, at start and every few seconds)
marks it interrupted and tells the chat so. `/tasks` lists a chat's tasks; `/tasks cancel ID`
cancels one, also on another replica (the owner's next heartbeat sees the request).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel

from gateway.sdk import (
    ChatRef,
    Command,
    CommandCall,
    Extensions,
    Inbound,
    InboundKind,
    SessionKey,
    SpunOff,
    Status,
    Store,
    StoreUnavailable,
    Submission,
    ToolContext,
    UserRef,
    keys,
)

log = logging.getLogger(__name__)

TaskStatus = Literal["running", "done", "failed", "cancelled", "interrupted"]
Submit = Callable[[Inbound], Awaitable[Submission]]
Work = Callable[[ToolContext], Awaitable[tuple[bool, str]]]

_TOLD = frozenset({Status.STARTED, Status.QUEUED, Status.DUPLICATE})
_KEEP_ENDED = 20  # ended tasks kept per chat for /tasks
_REPORT_CHARS = 12_000  # of a report carried into the chat's conversation


class TaskRecord(BaseModel):
    id: str
    session: str  # the SessionKey the report goes back to
    chat: ChatRef
    user: UserRef  # who asked (the turn's person)
    label: str
    status: TaskStatus = "running"
    started: float
    ended: float = 0.0
    owner: str  # the process running it
    beat: float
    report: str = ""
    told: bool = False  # the chat's conversation has the outcome
    cancel: bool = False  # someone asked to cancel it (for the owner to act on)

    @property
    def chat_scope(self) -> str:
        return SessionKey.parse(self.session).chat_scope

    def line(self) -> str:
        took = (self.ended or time.time()) - self.started
        return f"{self.id}: {self.status}, {took:.0f} s: {self.label}"


class BackgroundTasks:
    """The background tasks this process runs, and the records of every task in the store."""

    def __init__(
        self,
        store: Store,
        submit: Submit | None,
        *,
        max_per_chat: int,
        admins: list[str],
        beat_seconds: float = 10.0,
    ) -> None:
        self.store = store
        self.submit = submit
        self.max_per_chat = max_per_chat
        self.admins = set(admins)
        self.beat_seconds = beat_seconds
        self.stale_seconds = 3 * beat_seconds
        self.instance = uuid.uuid4().hex[:10]
        self._running: dict[str, asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def available(self) -> bool:
        return self.submit is not None

    # -- records -------------------------------------------------------------------------------

    async def records(self) -> list[TaskRecord]:
        found = []
        for raw in (await self.store.hgetall(keys.BACKGROUND_TASKS)).values():
            with contextlib.suppress(ValueError):
                found.append(TaskRecord.model_validate_json(raw))
        return sorted(found, key=lambda r: r.started)

    async def of_chat(self, chat_scope: str) -> list[TaskRecord]:
        return [r for r in await self.records() if r.chat_scope == chat_scope]

    async def load(self, task_id: str) -> TaskRecord | None:
        raw = await self.store.hget(keys.BACKGROUND_TASKS, task_id)
        return None if raw is None else TaskRecord.model_validate_json(raw)

    async def save(self, record: TaskRecord) -> None:
        await self.store.hset(keys.BACKGROUND_TASKS, record.id, record.model_dump_json())

    # -- starting and ending -------------------------------------------------------------------

    async def launch(self, ctx: ToolContext, label: str, work: Work) -> TaskRecord:
        """Record a task for the turn's chat and start `work` outside the turn; raises
        ValueError when the chat already runs its most."""
        scope = ctx.session.chat_scope
        live = [r for r in await self.of_chat(scope) if r.status == "running"]
        if len(live) >= self.max_per_chat:
            raise ValueError(
                f"this chat already has {len(live)} background task(s) running, the most it "
                f"may ({', '.join(r.id for r in live)}); wait for one or cancel it (/tasks)."
            )
        now = time.time()
        record = TaskRecord(
            id="t" + secrets.token_hex(3),
            session=str(ctx.session),
            chat=ctx.chat,
            user=ctx.user,
            label=label,
            started=now,
            owner=self.instance,
            beat=now,
        )
        await self.save(record)
        # Models of its own on the turn's chain: what it uses is settled when it ends.
        spun = ctx.spin_off() if ctx.spin_off is not None else None
        child = detached(ctx, f"background task {record.id} ({label})", spun)
        settle = spun.settle if spun is not None else None
        task = asyncio.create_task(self._run(record, work, child, settle), name=f"task {record.id}")
        self._running[record.id] = task
        task.add_done_callback(lambda _t: self._running.pop(record.id, None))
        log.info("background task started id=%s session=%s", record.id, record.session)
        return record

    async def _run(
        self,
        record: TaskRecord,
        work: Work,
        ctx: ToolContext,
        settle: Callable[[], Awaitable[None]] | None,
    ) -> None:
        try:
            ok, report = await work(ctx)
        except asyncio.CancelledError:
            if self._closing:
                await asyncio.shield(self._end(record, "interrupted", INTERRUPTED))
            else:
                await asyncio.shield(self._end(record, "cancelled", CANCELLED))
            raise
        except Exception as exc:  # reported to the chat, never lost in a task nobody awaits
            log.exception("background task crashed id=%s", record.id)
            ok, report = False, f"failed: {type(exc).__name__}"
        finally:
            if settle is not None:  # what it used counts against the turn's budgets
                await asyncio.shield(settle())
        await self._end(record, "done" if ok else "failed", report)

    async def _end(self, record: TaskRecord, status: TaskStatus, report: str) -> None:
        stored = await self.load(record.id) or record
        stored.status, stored.report, stored.ended = status, report, time.time()
        try:
            await self.save(stored)
        except StoreUnavailable as exc:
            log.error("background task end not recorded id=%s error=%s", record.id, exc)
        log.info("background task ended id=%s status=%s", record.id, status)
        if status in ("done", "failed"):
            await self.tell(stored)

    async def tell(self, record: TaskRecord) -> bool:
        """Hand the outcome to the task's session as a message for the agent, which answers
        in the chat and keeps both in the history; True once it is stored there."""
        if self.submit is None:
            return False
        inbound = Inbound(
            event_id=f"task:{record.id}:{record.status}",
            chat=record.chat,
            sender=record.user,
            text=outcome_text(record),
            mentioned=True,
            kind=InboundKind.AGENT,
            session=record.session,
        )
        try:
            submission = await self.submit(inbound)
        except Exception:
            log.exception("background task outcome not handed over id=%s", record.id)
            return False
        if submission.status not in _TOLD:
            log.warning("background task outcome not taken id=%s status=%s", record.id, submission)
            return False
        record.told = True
        with contextlib.suppress(StoreUnavailable):
            await self.save(record)
        return True

    async def cancel(self, record: TaskRecord) -> str:
        if record.status != "running":
            return f"Task {record.id} is not running ({record.status})."
        task = self._running.get(record.id)
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=5)
            await self._ended_unstarted(record.id, "cancelled", CANCELLED)
            return f"Cancelled task {record.id}."
        record.cancel = True  # the replica running it acts on its next heartbeat
        await self.save(record)
        return f"Asked the replica running task {record.id} to cancel it."

    # -- heartbeat and sweep -------------------------------------------------------------------

    async def start(self) -> None:
        if self._loop_task is None and self.available:
            self._loop_task = asyncio.create_task(self._beat_forever(), name="background tasks")

    async def close(self) -> None:
        """The gateway stops: the tasks running here end, marked interrupted; the next sweep
        (this gateway's next start, or another replica) tells their chats."""
        self._closing = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        running = dict(self._running)
        for task in running.values():
            task.cancel()
        if running:
            await asyncio.wait(running.values(), timeout=10)
        for task_id in running:
            await self._ended_unstarted(task_id, "interrupted", INTERRUPTED)

    async def _ended_unstarted(self, task_id: str, status: TaskStatus, report: str) -> None:
        """A task cancelled before its first step never saw the cancellation: end its record."""
        record = await self.load(task_id)
        if record is not None and record.status == "running":
            await self._end(record, status, report)

    async def sweep(self) -> None:
        """Refresh this process's heartbeats, act on cancel requests for its tasks, and mark
        tasks whose process is gone interrupted; hand over outcomes not yet told."""
        now = time.time()
        ended_per_chat: dict[str, list[TaskRecord]] = {}
        for record in await self.records():
            if record.status == "running":
                mine = self._running.get(record.id) if record.owner == self.instance else None
                if mine is not None:
                    if record.cancel:
                        mine.cancel()
                    else:
                        record.beat = now
                        await self.save(record)
                    continue
                if record.owner != self.instance and now - record.beat < self.stale_seconds:
                    continue  # another replica's, alive
                fresh = await self.load(record.id)  # it may have ended since it was read
                if fresh is None or fresh.status != "running":
                    continue
                record = fresh
                record.status, record.report, record.ended = "interrupted", INTERRUPTED, now
                await self.save(record)
                log.info("background task interrupted id=%s owner=%s", record.id, record.owner)
            if record.status in ("done", "failed", "interrupted") and not record.told:
                await self.tell(record)
            ended_per_chat.setdefault(record.chat_scope, []).append(record)
        for ended in ended_per_chat.values():
            done = [
                r for r in ended if (r.status != "running" and r.told) or r.status == "cancelled"
            ]
            for old in done[: max(0, len(done) - _KEEP_ENDED)]:
                await self.store.hdel(keys.BACKGROUND_TASKS, old.id)

    async def _beat_forever(self) -> None:
        # The first sweep waits a moment: the platforms start after the tools.
        await asyncio.sleep(min(self.beat_seconds, 1.0))
        while True:
            try:
                await self.sweep()
            except Exception:  # the store may be away for a moment; the next beat retries
                log.warning("background task sweep failed", exc_info=True)
            await asyncio.sleep(self.beat_seconds)

    # -- /tasks ----------------------------------------------------------------------------------

    def register(self, extensions: Extensions) -> None:
        if self.available:
            extensions.add_command(
                Command(
                    "tasks", "list background tasks (/tasks cancel ID to cancel one)", self.command
                )
            )
            extensions.add_stop_hook(self.stop_all)

    async def command(self, call: CommandCall) -> str:
        scope = call.session.chat_scope
        words = call.args.split()
        if not words:
            records = await self.of_chat(scope)
            if not records:
                return "No background tasks in this chat."
            return "Background tasks:\n" + "\n".join(r.line() for r in records)
        if words[0].lower() != "cancel" or len(words) != 2:
            return "Use /tasks to list background tasks, or /tasks cancel ID."
        record = await self.load(words[1])
        if record is None or record.chat_scope != scope:
            return f"No background task {words[1]} in this chat."
        sender = call.inbound.sender
        if sender.address != record.user.address and sender.address not in self.admins:
            return "Only the person who started this task, or an admin, can cancel it."
        return await self.cancel(record)

    async def stop_all(self, call: CommandCall) -> str | None:
        """`/stop all`: the chat's running background tasks are cancelled."""
        running = [r for r in await self.of_chat(call.session.chat_scope) if r.status == "running"]
        for record in running:
            await self.cancel(record)
        return f"Cancelled {len(running)} background task(s)." if running else None


CANCELLED = "Cancelled before it finished."
INTERRUPTED = "The gateway stopped while this task ran; it was not finished and will not resume."


def outcome_text(record: TaskRecord) -> str:
    """The message the task's session gets: marked as a task's report, not the person's."""
    report = record.report
    if len(report) > _REPORT_CHARS:
        report = report[:_REPORT_CHARS] + "\n[... report cut ...]"
    head = {
        "done": "finished",
        "failed": "failed",
        "interrupted": "was interrupted",
    }.get(record.status, record.status)
    return (
        f"[Background task {record.id} {head}: {record.label}. This is its report, not a "
        "message from the person; tell them what came of it.]\n"
        f"{report}"
    )


def detached(ctx: ToolContext, label: str, spun: SpunOff | None = None) -> ToolContext:
    """The context a background sub-agent runs in: the turn's person, chat, session, scope and
    models (`spun`: the same chain with usage of its own), and what outside content the turn
    had read so far, without the turn's own hold on its session, typing indicator or
    streamed reply, which end with the turn."""
    trust = None
    if ctx.trust is not None:  # a copy: the turn's own goes on without the task
        trust = dataclasses.replace(
            ctx.trust, sources=list(ctx.trust.sources), seen=list(ctx.trust.seen)
        )
    return ToolContext(
        session=ctx.session,
        chat=ctx.chat,
        user=ctx.user,
        turn_id=ctx.turn_id,
        is_subagent=ctx.is_subagent,
        message_id=ctx.message_id,
        trust=trust,
        scope=ctx.scope,
        llm=spun.llm if spun is not None else ctx.llm,
        depth=ctx.depth,
        task_label=label,
    )
