"""Job records in the store: the spec (what, where, when; written when a person acts), the state
(the next run; written by the scheduler leader) and a capped log of runs per job.

Spec and state live in separate hashes so that the leader writing a job's next run can never
bring back a job that someone removed a moment before.
"""

from __future__ import annotations

import json
import logging
import secrets
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.scheduling.times import Schedule, local_time, next_run
from gateway.sdk.messages import ChatRef, UserRef
from gateway.store import keys
from gateway.store.base import Store

log = logging.getLogger(__name__)

# pub/sub: "job <id> changed", a hint for the leader to re-read it
CHANNEL = keys.CRON_CHANNEL
_JOBS = keys.CRON_JOBS
_STATE = keys.CRON_STATE
_RUNS_KEPT_AFTER_REMOVAL = 30 * 86400.0  # `chatgate cron runs ID` still answers for a month
_FIRED_TTL = 8 * 86400.0  # longer than any hand-over or restart that could revisit a slot


class JobKind(StrEnum):
    MESSAGE = "message"  # send the stored text verbatim, no LLM
    AGENT = "agent"  # run the stored prompt as a turn in a fresh session and send the answer


class JobSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    kind: JobKind
    text: str
    when: str  # as the person or the model said it
    schedule: Schedule
    target: ChatRef  # stored concretely at creation: platform, chat, thread
    creator: UserRef
    created_at: datetime
    first_run: datetime
    paused: bool = False
    # Runs that fell due while paused are skipped, not reported as missed.
    resumed_at: datetime | None = None
    # Where runs deliver when not to `target` (a home channel or another chat, checked when
    # named and at each run, gateway/scheduling/targets.py); reports still go to `target`.
    deliver_to: ChatRef | None = None

    @property
    def destination(self) -> ChatRef:
        return self.deliver_to or self.target

    @property
    def chat_scope(self) -> str:
        return f"{self.target.platform}:{self.target.chat_id}"

    @property
    def preview(self) -> str:
        line = " ".join(self.text.split())
        return line if len(line) <= 60 else line[:59] + "…"

    def due(self, state: JobState) -> datetime | None:
        """The run the job waits for now (None: nothing left to run)."""
        due = state.next_run if state.last_slot is not None else self.first_run
        if due is not None and self.resumed_at is not None and due < self.resumed_at:
            due = next_run(self.schedule, self.resumed_at)
        return due


class JobState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    next_run: datetime | None = None
    last_slot: datetime | None = None  # None until the first run was claimed
    # A run claimed and not finished yet, and who runs it: a leader that finds one whose
    # heartbeat stopped (its process died) tells the chat instead of letting it vanish.
    inflight: datetime | None = None
    inflight_by: str | None = None
    failure_reported: bool = False  # one report per streak of failures, not one per run
    # Why the streak's last run failed (the console shows it), None once a run got through.
    failing: str | None = None


class RunStatus(StrEnum):
    DELIVERED = "delivered"
    TURN_FAILED = "turn_failed"  # an agent turn failed; its error line was delivered
    FAILED = "failed"  # not delivered
    MISSED = "missed"  # too late (beyond the grace window); the chat was told
    INTERRUPTED = "interrupted"  # the process running it stopped; the chat was told
    SKIPPED = "skipped"  # another process already handled this run


class RunRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slot: datetime  # when the run was due
    at: datetime  # when it finished
    status: RunStatus
    error: str | None = None
    message_id: str | None = None  # the platform's receipt
    attempts: int = 0
    instance: str = ""
    # A failure's report, the first of its streak: who it reached ("chat": the chat the job
    # was made in, "admins", "nobody"); None when the run was not reported.
    reported: str | None = None


def slot_key(slot: datetime) -> str:
    return f"{slot.timestamp():.3f}"


def new_job_id() -> str:
    return secrets.token_hex(4)


def describe_job(spec: JobSpec, state: JobState | None, *, with_chat: bool = False) -> str:
    """One line for /jobs, list_jobs and `chatgate cron list`."""
    tz = spec.schedule.tz
    due = spec.due(state or JobState())
    if spec.paused:
        when = "paused"
    elif due is None:
        when = "finished"
    else:
        when = f"next {local_time(due, tz)}"
    where = f" in {spec.target.address}" if with_chat else ""
    if spec.deliver_to is not None:
        where += f" -> {spec.deliver_to.address}"
    line = f"{spec.id} [{spec.kind.value}] {spec.when} ({when}){where}: {spec.preview}"
    if state is not None and state.failing:
        line += f" (last run failed: {state.failing})"
    return line


class JobBook:
    """Reads and writes job records; every process may use it, with or without the leader."""

    def __init__(self, store: Store, *, run_log_size: int = 50) -> None:
        self._store = store
        self._run_log_size = run_log_size

    async def all(self) -> list[JobSpec]:
        specs = []
        for job_id, raw in (await self._store.hgetall(_JOBS)).items():
            try:
                specs.append(JobSpec.model_validate_json(raw))
            except ValidationError as exc:
                log.error("unreadable job spec skipped job=%s error=%s", job_id, exc)
        return sorted(specs, key=lambda s: s.created_at)

    async def get(self, job_id: str) -> JobSpec | None:
        raw = await self._store.hget(_JOBS, job_id)
        return None if raw is None else JobSpec.model_validate_json(raw)

    async def exists(self, job_id: str) -> bool:
        return await self._store.hget(_JOBS, job_id) is not None

    async def put(self, spec: JobSpec) -> None:
        await self._store.hset(_JOBS, spec.id, spec.model_dump_json())

    async def remove(self, job_id: str) -> bool:
        removed = await self._store.hdel(_JOBS, job_id)
        await self._store.hdel(_STATE, job_id)
        await self._store.expire(self._runs_key(job_id), _RUNS_KEPT_AFTER_REMOVAL)
        return removed > 0

    async def state(self, job_id: str) -> JobState:
        raw = await self._store.hget(_STATE, job_id)
        return JobState() if raw is None else JobState.model_validate_json(raw)

    async def states(self) -> dict[str, JobState]:
        out = {}
        for job_id, raw in (await self._store.hgetall(_STATE)).items():
            try:
                out[job_id] = JobState.model_validate_json(raw)
            except ValidationError:
                log.error("unreadable job state reset job=%s", job_id)
        return out

    async def put_state(self, job_id: str, state: JobState) -> None:
        await self._store.hset(_STATE, job_id, state.model_dump_json())

    async def drop_state(self, job_id: str) -> None:
        await self._store.hdel(_STATE, job_id)

    async def claim(self, job_id: str, slot: datetime, owner: str, *, what: str = "run") -> bool:
        """Take the one right to act on this run (or to report it, `what`); False when another
        process already did."""
        key = keys.cron_fired(job_id, slot_key(slot), what)
        return await self._store.set(key, owner, ttl=_FIRED_TTL, only_if_absent=True)

    async def beat(self, job_id: str, slot: datetime, owner: str, ttl: float) -> None:
        """Say a claimed run is still being carried out (it expires `ttl` after the last beat)."""
        await self._store.set(self._running_key(job_id, slot), owner, ttl=ttl)

    async def running(self, job_id: str, slot: datetime) -> bool:
        return await self._store.get(self._running_key(job_id, slot)) is not None

    async def stopped(self, job_id: str, slot: datetime) -> None:
        await self._store.delete(self._running_key(job_id, slot))

    async def log_run(self, job_id: str, record: RunRecord) -> None:
        await self._store.push(
            self._runs_key(job_id), record.model_dump_json(), max_len=self._run_log_size
        )

    async def runs(self, job_id: str) -> list[RunRecord]:
        return [
            RunRecord.model_validate_json(raw)
            for raw in await self._store.list_range(self._runs_key(job_id))
        ]

    async def notify(self, job_id: str) -> None:
        await self._store.publish(CHANNEL, json.dumps({"job": job_id}))

    @staticmethod
    def _runs_key(job_id: str) -> str:
        return keys.cron_runs(job_id)

    @staticmethod
    def _running_key(job_id: str, slot: datetime) -> str:
        return keys.cron_running(job_id, slot_key(slot))


def utcnow() -> datetime:
    return datetime.now(UTC)
