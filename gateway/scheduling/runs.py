"""Carrying out one claimed run of a job: send the message or run the agent turn, log the run,
and make sure a run that did not get through is reported rather than lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from enum import Enum
from typing import Any

from gateway.intake.admission import Status, Submission
from gateway.runtime.metrics import Metrics
from gateway.scheduling.delivery import Courier, Delivery
from gateway.scheduling.jobs import (
    JobBook,
    JobKind,
    JobSpec,
    RunRecord,
    RunStatus,
    slot_key,
    utcnow,
)
from gateway.scheduling.times import local_time, next_run
from gateway.sdk.messages import Inbound, InboundKind, Outbound
from gateway.sessions.key import SessionKey
from gateway.store.base import StoreUnavailable

log = logging.getLogger(__name__)

Submit = Callable[[Inbound], Awaitable[Submission]]
ForgetSession = Callable[[SessionKey], Awaitable[None]]
# A job's delivery target checked again at run time: None, or why it may not be used now.
CheckTarget = Callable[[JobSpec], Awaitable[str | None]]


class RunAction(Enum):
    RUN = "run"
    MISSED = "missed"  # tell the chat the run was missed
    INTERRUPTED = "interrupted"  # tell the chat a run died with the process running it


class JobRunner:
    def __init__(
        self,
        book: JobBook,
        courier: Courier,
        *,
        submit: Submit,
        forget_session: ForgetSession,
        instance_id: str,
        turn_timeout: float,
        heartbeat: float,
        lock: asyncio.Lock,
        metrics: Metrics | None = None,
        check_target: CheckTarget | None = None,
    ) -> None:
        self._book = book
        self._courier = courier
        self._submit = submit
        self._forget_session = forget_session
        self._instance = instance_id
        self._turn_timeout = turn_timeout
        self._heartbeat = heartbeat
        # The scheduler's lock: a run's state update must not interleave with the leader's.
        self._lock = lock
        self._metrics = metrics or Metrics()
        self._check_target = check_target

    async def execute(self, spec: JobSpec, slot: datetime, action: RunAction, final: bool) -> None:
        """Carry out a claimed run, log it, and report a failure (once per streak)."""
        log.info("job run job=%s slot=%s action=%s", spec.id, slot, action.value)
        beating = asyncio.create_task(self._beat(spec.id, slot), name=f"job {spec.id} beat")
        try:
            if action is RunAction.MISSED:
                record = await self._tell(
                    spec, slot, RunStatus.MISSED, self._missed_text(spec, slot)
                )
            elif action is RunAction.INTERRUPTED:
                text = self._interrupted_text(spec, slot)
                record = await self._tell(spec, slot, RunStatus.INTERRUPTED, text)
            elif refusal := await self._refused_target(spec):
                record = self._record(slot, RunStatus.FAILED, None, error=refusal)
            elif spec.kind is JobKind.MESSAGE:
                out = Outbound(chat=spec.destination, text=spec.text, markdown=False)
                record = self._record(slot, RunStatus.DELIVERED, await self._courier.send(out))
            else:
                record = await self._run_agent(spec, slot)
        except Exception as exc:
            log.exception("job run failed job=%s", spec.id)
            record = RunRecord(
                slot=slot,
                at=utcnow(),
                status=RunStatus.FAILED,
                error=f"internal error: {type(exc).__name__}",
                instance=self._instance,
            )
        finally:
            beating.cancel()
        self._metrics.inc("scheduler_runs_total", kind=spec.kind.value, status=str(record.status))
        log.info(
            "job run done job=%s slot=%s status=%s message=%s error=%s",
            spec.id,
            slot,
            record.status,
            record.message_id,
            record.error,
        )
        try:
            await self._finish(spec, slot, record, final)
            await self._book.stopped(spec.id, slot)
        except StoreUnavailable as exc:
            log.error("job run not recorded job=%s slot=%s error=%s", spec.id, slot, exc)

    async def _refused_target(self, spec: JobSpec) -> str | None:
        if spec.deliver_to is None or self._check_target is None:
            return None
        return await self._check_target(spec)

    async def _beat(self, job_id: str, slot: datetime) -> None:
        while True:
            try:
                await self._book.beat(job_id, slot, self._instance, ttl=3 * self._heartbeat)
            except StoreUnavailable as exc:
                log.warning("job heartbeat failed job=%s error=%s", job_id, exc)
            await asyncio.sleep(self._heartbeat)

    async def _finish(self, spec: JobSpec, slot: datetime, record: RunRecord, final: bool) -> None:
        """Update the job's state, report a failure that starts a streak, log the run (with
        whom the report reached, for the console)."""
        failed = record.status is RunStatus.FAILED
        async with self._lock:
            state = await self._book.state(spec.id)
            report = failed and not state.failure_reported
            update: dict[str, Any] = {}
            if state.inflight == slot:
                update |= {"inflight": None, "inflight_by": None}
            if failed:
                update |= {"failure_reported": True, "failing": record.error or "not delivered"}
            elif record.status in (RunStatus.DELIVERED, RunStatus.TURN_FAILED):
                update |= {"failure_reported": False, "failing": None}
            if not final and await self._book.exists(spec.id):
                await self._book.put_state(spec.id, state.model_copy(update=update))
        if report:
            told = await self._report_failure(spec, slot, record)
            record = record.model_copy(update={"reported": told})
        await self._book.log_run(spec.id, record)
        if final:
            await self._book.remove(spec.id)

    async def _run_agent(self, spec: JobSpec, slot: datetime) -> RunRecord:
        # Delivered elsewhere, the prompt runs in the chat it is delivered to (its workspace,
        # its budget), as its creator.
        target = spec.destination
        # A fresh session per run: the prompt is answered without the chat's conversation.
        session = SessionKey(
            target.platform,
            target.chat_id,
            target.thread_id,
            f"cron.{spec.id}.{int(slot.timestamp())}",
        )
        inbound = Inbound(
            event_id=f"cron:{spec.id}:{slot_key(slot)}",
            chat=target,
            sender=spec.creator,
            text=f"[Scheduled prompt, job {spec.id}, runs {spec.when}]\n{spec.text}",
            mentioned=True,
            kind=InboundKind.AGENT,
            session=str(session),
            job_id=spec.id,
        )
        try:
            submission = await self._submit(inbound)
            if submission.status is Status.DUPLICATE:
                return self._record(slot, RunStatus.SKIPPED, None, error="already run")
            outcome = await asyncio.wait_for(asyncio.shield(submission.done), self._turn_timeout)
        except TimeoutError:
            error = f"the agent turn did not finish within {self._turn_timeout:.0f} s"
            return self._record(slot, RunStatus.FAILED, None, error=error)
        finally:
            with contextlib.suppress(Exception):
                await self._forget_session(session)
        status = RunStatus.DELIVERED if outcome.ok else RunStatus.TURN_FAILED
        if outcome.sent is not None and outcome.sent.message_id:
            return self._record(slot, status, Delivery(outcome.sent, None, 1), error=outcome.error)
        # The turn's own reply did not get through: the answer still must.
        text = (
            outcome.reply or outcome.error or "The scheduled prompt was stopped before it answered."
        )
        delivery = await self._courier.send(Outbound(chat=target, text=text))
        return self._record(slot, status, delivery, error=outcome.error)

    async def _tell(self, spec: JobSpec, slot: datetime, status: RunStatus, text: str) -> RunRecord:
        delivery = await self._courier.send(Outbound(chat=spec.target, text=text, markdown=False))
        record = self._record(slot, status, delivery)
        if not delivery.ok:
            what = "missed" if status is RunStatus.MISSED else "interrupted"
            record = record.model_copy(
                update={
                    "status": RunStatus.FAILED,
                    "error": f"{what}; notice failed: {delivery.error}",
                }
            )
        return record

    def _record(
        self,
        slot: datetime,
        status: RunStatus,
        delivery: Delivery | None,
        *,
        error: str | None = None,
    ) -> RunRecord:
        if delivery is not None and not delivery.ok:
            status, error = RunStatus.FAILED, delivery.error
        return RunRecord(
            slot=slot,
            at=utcnow(),
            status=status,
            error=error,
            message_id=delivery.sent.message_id if delivery and delivery.sent else None,
            attempts=delivery.attempts if delivery else 0,
            instance=self._instance,
        )

    # -- what the chat is told -----------------------------------------------------------------

    @staticmethod
    def _what(spec: JobSpec) -> str:
        noun = "reminder" if spec.kind is JobKind.MESSAGE else "scheduled prompt"
        return f"{noun} \u201c{spec.preview}\u201d (job {spec.id})"

    def _then(self, spec: JobSpec) -> str:
        after = next_run(spec.schedule, utcnow())
        return f" Next run: {local_time(after, spec.schedule.tz)}." if after else ""

    def _missed_text(self, spec: JobSpec, slot: datetime) -> str:
        return (
            f"Missed {self._what(spec)}: it was due at {local_time(slot, spec.schedule.tz)}, "
            f"but I was not running then.{self._then(spec)}"
        )

    def _interrupted_text(self, spec: JobSpec, slot: datetime) -> str:
        return (
            f"The {self._what(spec)} due at {local_time(slot, spec.schedule.tz)} was interrupted "
            f"when the gateway process running it stopped; it may not have been delivered."
            f"{self._then(spec)}"
        )

    async def _report_failure(self, spec: JobSpec, slot: datetime, record: RunRecord) -> str:
        """Tell the chat the job was made in (its owner's), or the admins; returns who heard."""
        due = local_time(slot, spec.schedule.tz)
        to = f" to {spec.deliver_to.address}" if spec.deliver_to is not None else ""
        chat_text = f"I could not deliver the {self._what(spec)}{to} due at {due}: {record.error}"
        admin_text = (
            f"Scheduled job {spec.id} for {spec.destination.address} (made by "
            f"{spec.creator.address}) was not delivered at {due}: {record.error}"
        )
        try:
            told = await self._courier.report(spec.target, chat_text, admin_text)
        except Exception:  # the run is logged (and shown in the console) all the same
            log.exception("job failure report failed job=%s", spec.id)
            told = "nobody"
        log.warning("job failure reported job=%s to=%s error=%s", spec.id, told, record.error)
        return told
