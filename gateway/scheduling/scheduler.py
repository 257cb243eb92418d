"""The scheduler: reminders and scheduled prompts that fire on time, once, in their own chat.

Design: job specs in our Store are the source of truth (gateway/scheduling/jobs.py), and
APScheduler 3's AsyncIOScheduler, with its in-memory job store, only does the timing. We chose
this over RedisJobStore because it works on both store backends, pickles nothing, and sidesteps
APScheduler's rule that a job store must never be shared between running schedulers: only the
holder of the `scheduler` leader lease runs APScheduler, and when a process becomes leader it
rebuilds the timers from the specs. Any process may create, pause or remove jobs; it writes the
spec and publishes a hint so the leader re-reads that job at once (the leader also re-reads all
jobs every `resync_seconds`, so a lost hint only delays).

Each job has one APScheduler timer, for its next run only. When it fires, the leader claims the
run with a `cron:fired:{job}:{slot}` key before any side effect (so a hand-over race cannot run it
twice), stores the following run time, re-arms, and delivers in a task. A run found late
(missed while no leader ran, or a stalled loop) is coalesced into one: within
`misfire_grace_seconds` it still runs, later than that its chat is told it was missed. A run
whose process dies mid-way stops beating; the leader then tells its chat it was interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from gateway.config import SchedulerSettings
from gateway.runtime.leader import LeaderElection
from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_task, stop_tasks
from gateway.scheduling.delivery import Courier
from gateway.scheduling.jobs import (
    CHANNEL,
    JobBook,
    JobKind,
    JobSpec,
    JobState,
    new_job_id,
    slot_key,
    utcnow,
)
from gateway.scheduling.runs import CheckTarget, ForgetSession, JobRunner, RunAction, Submit
from gateway.scheduling.times import Schedule, WhenError, check_schedule, local_time, next_run
from gateway.scheduling.when import parse_when
from gateway.sdk.channels import Outbox
from gateway.sdk.messages import ChatRef, UserRef
from gateway.store.base import Store, StoreUnavailable

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

log = logging.getLogger(__name__)
# APScheduler logs every timer it adds, runs and removes at INFO; we log each run ourselves.
logging.getLogger("apscheduler").setLevel(logging.WARNING)

MAX_TEXT = 4000  # characters in a job's message or prompt
_STOP_GRACE = 5.0  # seconds a stopping leader lets runs in flight finish
_RETRY_AFTER_STORE_ERROR = 5.0


class JobError(Exception):
    """A job request that cannot be done; the message says why and what to do instead."""


def chat_scope(chat: ChatRef) -> str:
    return f"{chat.platform}:{chat.chat_id}"


class Scheduler:
    def __init__(
        self,
        settings: SchedulerSettings,
        *,
        store: Store,
        outbox: Outbox,
        submit: Submit,
        forget_session: ForgetSession,
        is_admin: Callable[[UserRef], bool],
        admins: Sequence[str],
        instance_id: str,
        turn_timeout: float,
        metrics: Metrics | None = None,
        check_target: CheckTarget | None = None,
    ) -> None:
        self.settings = settings
        self.book = JobBook(store, run_log_size=settings.run_log_size)
        self._store = store
        courier = Courier(
            outbox,
            attempts=settings.delivery_attempts,
            base_delay=settings.retry_base_delay,
            max_delay=settings.retry_max_delay,
            admins=admins,
        )
        self._is_admin = is_admin
        self._instance = instance_id
        self._election = LeaderElection(
            store,
            "scheduler",
            instance_id,
            ttl=settings.leader_ttl,
            on_elected=self._on_elected,
            on_deposed=self._on_deposed,
        )
        self._started = False
        # APScheduler's timers, made when the first job is armed: a gateway without scheduled
        # jobs does not load it (~0.6 MB). They run while this process leads (`_leading`).
        self._aps: AsyncIOScheduler | None = None
        self._leading = False
        self._lock = asyncio.Lock()  # one job state change at a time in this process
        self._runner = JobRunner(
            self.book,
            courier,
            submit=submit,
            forget_session=forget_session,
            instance_id=instance_id,
            turn_timeout=turn_timeout,
            heartbeat=settings.leader_ttl,
            lock=self._lock,
            metrics=metrics,
            check_target=check_target,
        )
        self._runs: dict[tuple[str, str], asyncio.Task[None]] = {}  # (job, slot) in flight here
        self._listener: asyncio.Task[None] | None = None
        self._resync: asyncio.Task[None] | None = None

    # -- what tools, commands and the CLI use ------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self._election.is_leader

    def is_admin(self, user: UserRef) -> bool:
        return self._is_admin(user)

    def parse(self, when: str, timezone: str = "") -> Schedule:
        """Read a "when"; raises JobError with what to fix."""
        try:
            return parse_when(
                when, now=utcnow(), timezone=timezone or self.settings.default_timezone
            )
        except WhenError as exc:
            raise JobError(str(exc)) from None

    async def create(
        self,
        *,
        kind: JobKind,
        text: str,
        when: str,
        chat: ChatRef,
        user: UserRef,
        timezone: str = "",
        schedule: Schedule | None = None,
        deliver_to: ChatRef | None = None,
    ) -> JobSpec:
        """Validate and store a new job for `chat`; raises JobError saying what to change."""
        text = text.strip()
        if not text:
            raise JobError("the job needs a text: the message to send or the prompt to run")
        if len(text) > MAX_TEXT:
            raise JobError(f"the text has {len(text):,} characters; keep it under {MAX_TEXT:,}")
        schedule = schedule or self.parse(when, timezone)
        now = utcnow()
        try:
            first = check_schedule(
                schedule, now=now, min_interval=self.settings.min_interval_seconds
            )
        except WhenError as exc:
            raise JobError(str(exc)) from None
        specs = await self.book.all()
        limit = self.settings.max_jobs_per_chat
        if sum(spec.chat_scope == chat_scope(chat) for spec in specs) >= limit:
            raise JobError(
                f"this chat already has {limit} scheduled jobs, the most allowed; remove one "
                "first (/jobs lists them, /unremind ID removes one)"
            )
        taken = {spec.id for spec in specs}
        job_id = new_job_id()
        while job_id in taken:
            job_id = new_job_id()
        spec = JobSpec(
            id=job_id,
            kind=kind,
            text=text,
            when=" ".join(when.split()),
            schedule=schedule,
            target=chat,
            creator=user,
            created_at=now,
            first_run=first,
            deliver_to=deliver_to,
        )
        await self.book.put(spec)
        log.info("job created job=%s kind=%s chat=%s first=%s", job_id, kind, chat.address, first)
        await self._changed(job_id)
        return spec

    async def jobs(self, chat: ChatRef | None) -> list[tuple[JobSpec, JobState]]:
        """The jobs of `chat` (all chats for None), oldest first, with their state."""
        states = await self.book.states()
        return [
            (spec, states.get(spec.id, JobState()))
            for spec in await self.book.all()
            if chat is None or spec.chat_scope == chat_scope(chat)
        ]

    async def find(self, job_id: str, *, user: UserRef, chat: ChatRef) -> JobSpec:
        """A job this person may manage here: one of this chat's, or any for an admin."""
        spec = await self.book.get(job_id.strip())
        if spec is None or not (self.is_admin(user) or spec.chat_scope == chat_scope(chat)):
            raise JobError(
                f"there is no job {job_id.strip()!r} in this chat; list the chat's jobs to see "
                "their ids"
            )
        return spec

    async def remove(self, job_id: str, *, user: UserRef, chat: ChatRef) -> JobSpec:
        spec = await self.find(job_id, user=user, chat=chat)
        await self.book.remove(spec.id)
        log.info("job removed job=%s by=%s", spec.id, user.address)
        await self._changed(spec.id)
        return spec

    async def pause(self, job_id: str, *, user: UserRef, chat: ChatRef) -> JobSpec:
        spec = await self.find(job_id, user=user, chat=chat)
        if spec.paused:
            raise JobError(f"job {spec.id} is already paused; resume it to run it again")
        paused = spec.model_copy(update={"paused": True})
        await self.book.put(paused)
        await self._changed(spec.id)
        return paused

    async def resume(self, job_id: str, *, user: UserRef, chat: ChatRef) -> JobSpec:
        spec = await self.find(job_id, user=user, chat=chat)
        if not spec.paused:
            raise JobError(f"job {spec.id} is not paused")
        now = utcnow()
        if next_run(spec.schedule, now) is None:
            raise JobError(
                f"job {spec.id} was due at {local_time(spec.first_run, spec.schedule.tz)}, which "
                "passed while it was paused; remove it and schedule a new one"
            )
        resumed = spec.model_copy(update={"paused": False, "resumed_at": now})
        await self.book.put(resumed)
        await self._changed(spec.id)
        return resumed

    async def run_now(self, job_id: str, *, user: UserRef) -> JobSpec:
        """Run a job once now, in this process, outside its schedule (the web console's "run
        now"); its next scheduled run stays as it was. The run is logged like any other."""
        spec = await self.book.get(job_id.strip())
        if spec is None:
            raise JobError(f"there is no job {job_id.strip()!r}")
        if not self._started:
            raise JobError("this process runs no jobs (scheduler.enabled = false)")
        slot = utcnow()
        if not await self.book.claim(spec.id, slot, self._instance, what="now"):
            raise JobError(f"job {spec.id} was just started; wait for its run to finish")
        log.info("job run now job=%s by=%s", spec.id, user.address)
        self._spawn(spec, slot, RunAction.RUN, final=False)
        return spec

    async def next_run_of(self, spec: JobSpec) -> datetime | None:
        return None if spec.paused else spec.due(await self.book.state(spec.id))

    async def _changed(self, job_id: str) -> None:
        if self.is_leader:
            await self._sync_one(job_id)
        await self.book.notify(job_id)

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        if not self.settings.enabled:
            log.info("scheduler disabled in this process; jobs run in another one")
            return
        self._started = True
        self._listener = asyncio.create_task(self._listen(), name="scheduler hints")
        self._election.start()

    async def stop(self) -> None:
        if not self._started:
            return
        await _cancel(self._listener)
        self._listener = None
        await self._election.stop()
        running = list(self._runs.values())
        if running:
            # A run cut here stays marked in flight; the next leader tells its chat.
            _, cut = await asyncio.wait(running, timeout=_STOP_GRACE)
            await stop_tasks(list(cut))
        if self._aps is not None:
            self._aps.shutdown(wait=False)
            self._aps = None
        self._started = self._leading = False

    async def _on_elected(self) -> None:
        log.info("scheduler leader instance=%s", self._instance)
        await self._sync_all()
        self._leading = True
        if self._aps is not None:
            self._aps.resume()
        self._resync = asyncio.create_task(self._resync_loop(), name="scheduler resync")

    async def _on_deposed(self) -> None:
        log.info("scheduler no longer leader instance=%s", self._instance)
        await _cancel(self._resync)
        self._resync = None
        self._leading = False
        if self._aps is not None:
            self._aps.pause()
            self._aps.remove_all_jobs()

    async def _listen(self) -> None:
        while True:
            try:
                async for raw in self._store.listen(CHANNEL):
                    if not self.is_leader:
                        continue
                    try:
                        job_id = str(json.loads(raw)["job"])
                    except (ValueError, KeyError, TypeError):
                        log.warning("bad scheduler hint ignored")
                        continue
                    await self._sync_one(job_id)
                return  # the store was closed
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduler hint listener failed; listening again")
                await asyncio.sleep(1.0)

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            try:
                await self._sync_all()
            except StoreUnavailable as exc:
                log.warning("scheduler resync failed error=%s", exc)
            except Exception:
                log.exception("scheduler resync failed")

    # -- the leader's timing ---------------------------------------------------------------------

    async def _sync_all(self) -> None:
        specs = await self.book.all()
        ids = {spec.id for spec in specs}
        for spec in specs:
            async with self._lock:
                await self._advance(spec, await self.book.state(spec.id))
        for orphan in set(await self.book.states()) - ids:
            await self.book.drop_state(orphan)  # its job was removed while a run was finishing
        if self._aps is not None:
            for job in self._aps.get_jobs():
                if job.id not in ids:
                    job.remove()

    async def _sync_one(self, job_id: str) -> None:
        async with self._lock:
            spec = await self.book.get(job_id)
            if spec is None:
                self._disarm(job_id)
                return
            await self._advance(spec, await self.book.state(job_id))

    async def _on_timer(self, job_id: str) -> None:
        """APScheduler calls this when a job's next run is due."""
        if not self.is_leader:
            return
        try:
            await self._sync_one(job_id)
        except StoreUnavailable as exc:
            log.warning("job not run, store unavailable job=%s error=%s", job_id, exc)
            self._arm(job_id, utcnow() + timedelta(seconds=_RETRY_AFTER_STORE_ERROR))

    async def _advance(self, spec: JobSpec, state: JobState) -> None:
        """Arm the job's timer, or run what is due now (caller holds the lock)."""
        if state.inflight is not None and await self._abandoned(spec, state.inflight):
            # Its process died mid-run: the chat must not be left guessing.
            self._spawn(spec, state.inflight, RunAction.INTERRUPTED, final=False)
        if spec.paused:
            self._disarm(spec.id)
            return
        now = utcnow()
        due = spec.due(state)
        if due is None:
            self._disarm(spec.id)
            if state.inflight is None:  # a finished one-shot whose runner died before removing it
                await self.book.remove(spec.id)
            return
        if due > now:
            self._arm(spec.id, due)
            return
        grace = timedelta(seconds=self.settings.misfire_grace_seconds)
        slot, action = _latest_run(spec.schedule, due, now - grace, now), RunAction.RUN
        if slot is None:
            slot, action = due, RunAction.MISSED
        # Coalesce: every run up to now is covered by this one.
        following = next_run(spec.schedule, max(slot, now))
        claimed = await self.book.claim(spec.id, slot, self._instance)
        update: dict[str, Any] = {"next_run": following, "last_slot": slot}
        if claimed:
            await self.book.beat(spec.id, slot, self._instance, ttl=3 * self.settings.leader_ttl)
            update |= {"inflight": slot, "inflight_by": self._instance}
        await self.book.put_state(spec.id, state.model_copy(update=update))
        if following is None:
            self._disarm(spec.id)
        else:
            self._arm(spec.id, following)
        if claimed:
            self._spawn(spec, slot, action, final=following is None)
        else:
            log.info("run already handled elsewhere job=%s slot=%s", spec.id, slot)

    async def _abandoned(self, spec: JobSpec, slot: datetime) -> bool:
        """A run marked in flight whose runner stopped beating, reported by one process only."""
        if (spec.id, slot_key(slot)) in self._runs or await self.book.running(spec.id, slot):
            return False
        return await self.book.claim(spec.id, slot, self._instance, what="interrupted")

    def _timers(self) -> AsyncIOScheduler:
        if self._aps is None:
            from apscheduler.schedulers.asyncio import AsyncIOScheduler

            self._aps = AsyncIOScheduler(
                timezone=UTC,
                # We judge lateness ourselves against the stored slot, so APScheduler never skips.
                job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            )
            self._aps.start(paused=not self._leading)
        return self._aps

    def _arm(self, job_id: str, when: datetime) -> None:
        if not self._started:
            return
        from apscheduler.triggers.date import DateTrigger

        timers = self._timers()
        job = timers.get_job(job_id)
        if job is not None and job.next_run_time == when:
            return
        timers.add_job(
            self._on_timer,
            DateTrigger(run_date=when),
            args=[job_id],
            id=job_id,
            replace_existing=True,
        )

    def _disarm(self, job_id: str) -> None:
        if self._aps is not None:
            from apscheduler.jobstores.base import JobLookupError

            with contextlib.suppress(JobLookupError):
                self._aps.remove_job(job_id)

    # -- runs ------------------------------------------------------------------------------------

    def _spawn(self, spec: JobSpec, slot: datetime, action: RunAction, *, final: bool) -> None:
        key = (spec.id, slot_key(slot))
        if key in self._runs:
            return
        task = asyncio.create_task(
            self._runner.execute(spec, slot, action, final), name=f"job {spec.id}"
        )
        self._runs[key] = task
        task.add_done_callback(lambda _: self._runs.pop(key, None))


async def _cancel(task: asyncio.Task[None] | None) -> None:
    await stop_task(task)


def _latest_run(
    schedule: Schedule, due: datetime, start: datetime, now: datetime
) -> datetime | None:
    """The last run time in [start, now] at or after `due`; None when there is none."""
    slot = due if due >= start else next_run(schedule, start - timedelta(microseconds=1))
    if slot is None or slot > now:
        return None
    while (later := next_run(schedule, slot)) is not None and later <= now:
        slot = later
    return slot
