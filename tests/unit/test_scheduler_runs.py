"""The leader's run logic without timers: the fired-key guard against a hand-over race, runs left
in flight by a dead process, paused jobs, and the due-time rules."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path

import pytest

from gateway.config import SchedulerSettings
from gateway.intake.admission import Submission
from gateway.scheduling.jobs import JobKind, JobSpec, JobState, RunRecord, RunStatus, utcnow
from gateway.scheduling.scheduler import Scheduler
from gateway.sdk.channels import Outbox
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, UserRef
from gateway.sessions.key import SessionKey
from gateway.store.embedded import EmbeddedStore
from tests.fakes.recording_adapter import RecordingAdapter

TEAM = ChatRef(platform="rec", chat_id="team", kind=ChatKind.GROUP)
ALICE = UserRef(platform="rec", user_id="alice")


async def _no_submit(inbound: Inbound) -> Submission:
    raise AssertionError("no turns here")


async def _no_forget(key: SessionKey) -> None:
    return None


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    store = EmbeddedStore(tmp_path / "data")
    yield store
    await store.close()


@pytest.fixture
def rec() -> RecordingAdapter:
    return RecordingAdapter()


@pytest.fixture
def make(store: EmbeddedStore, rec: RecordingAdapter) -> Callable[[str], Scheduler]:
    outbox = Outbox()
    outbox.register(rec)
    settings = SchedulerSettings(min_interval_seconds=1, misfire_grace_seconds=60)

    def build(instance: str) -> Scheduler:
        return Scheduler(
            settings,
            store=store,
            outbox=outbox,
            submit=_no_submit,
            forget_session=_no_forget,
            is_admin=lambda user: False,
            admins=[],
            instance_id=instance,
            turn_timeout=5,
        )

    return build


async def due_now(scheduler: Scheduler, when: str = "10m") -> JobSpec:
    """A job whose first run fell due a moment ago."""
    spec = await scheduler.create(
        kind=JobKind.MESSAGE, text="ping", when=when, chat=TEAM, user=ALICE
    )
    past = utcnow() - timedelta(seconds=1)
    update: dict[str, object] = {"first_run": past}
    if spec.schedule.kind == "once":
        update["schedule"] = spec.schedule.model_copy(update={"at": past})
    else:
        update["schedule"] = spec.schedule.model_copy(update={"start": past})
    moved = spec.model_copy(update=update)
    await scheduler.book.put(moved)
    return moved


async def runs_when_settled(scheduler: Scheduler, job_id: str, count: int) -> list[RunRecord]:
    for _ in range(200):
        runs = await scheduler.book.runs(job_id)
        if len(runs) >= count:
            return runs
        await asyncio.sleep(0.01)
    raise AssertionError(f"expected {count} run(s) of {job_id}")


async def test_two_leaders_racing_over_one_run_fire_it_once(
    make: Callable[[str], Scheduler], rec: RecordingAdapter
) -> None:
    first, second = make("a"), make("b")
    spec = await due_now(first)
    # A hand-over race: both believe they lead and catch up on the same due run.
    await asyncio.gather(first._sync_all(), second._sync_all())
    (run,) = await runs_when_settled(first, spec.id, 1)
    await asyncio.sleep(0.1)
    assert rec.texts() == ["ping"]
    assert run.status is RunStatus.DELIVERED and run.instance in ("a", "b")
    assert await first.book.runs(spec.id) == [run]


async def test_a_run_left_in_flight_by_a_dead_process_is_reported(
    make: Callable[[str], Scheduler], rec: RecordingAdapter
) -> None:
    dead, heir = make("dead"), make("heir")  # "dead" never beats: its process is gone
    spec = await dead.create(
        kind=JobKind.MESSAGE, text="ping", when="every 1h", chat=TEAM, user=ALICE
    )
    slot = spec.first_run - timedelta(hours=1)
    await dead.book.put_state(
        spec.id,
        JobState(next_run=spec.first_run, last_slot=slot, inflight=slot, inflight_by="dead"),
    )
    await heir._sync_all()
    (run,) = await runs_when_settled(heir, spec.id, 1)
    assert run.status is RunStatus.INTERRUPTED and run.slot == slot
    (notice,) = rec.texts()
    assert f"(job {spec.id})" in notice and "was interrupted" in notice
    assert "may not have been delivered" in notice and "Next run:" in notice
    state = await heir.book.state(spec.id)
    assert state.inflight is None and state.next_run == spec.first_run
    # Reported once: neither a later resync nor another process repeats the notice.
    await dead.book.put_state(spec.id, state.model_copy(update={"inflight": slot}))
    await asyncio.gather(heir._sync_all(), make("third")._sync_all())
    await asyncio.sleep(0.05)
    assert len(rec.texts()) == 1


async def test_a_run_still_beating_is_not_reported_as_interrupted(
    make: Callable[[str], Scheduler], rec: RecordingAdapter
) -> None:
    busy, other = make("busy"), make("other")
    spec = await busy.create(
        kind=JobKind.MESSAGE, text="ping", when="every 1h", chat=TEAM, user=ALICE
    )
    slot = spec.first_run - timedelta(hours=1)
    await busy.book.put_state(
        spec.id,
        JobState(next_run=spec.first_run, last_slot=slot, inflight=slot, inflight_by="busy"),
    )
    await busy.book.beat(spec.id, slot, "busy", ttl=5)  # e.g. a long agent turn, deposed leader
    await other._sync_all()
    await asyncio.sleep(0.05)
    assert rec.texts() == [] and await other.book.runs(spec.id) == []


async def test_paused_jobs_do_not_run_and_resume_without_missed_notices(
    make: Callable[[str], Scheduler], rec: RecordingAdapter
) -> None:
    scheduler = make("a")
    spec = await due_now(scheduler, "every 1h")
    await scheduler.pause(spec.id, user=ALICE, chat=TEAM)
    await scheduler._sync_all()
    await asyncio.sleep(0.05)
    assert rec.texts() == [] and await scheduler.book.runs(spec.id) == []

    resumed = await scheduler.resume(spec.id, user=ALICE, chat=TEAM)
    await scheduler._sync_all()
    await asyncio.sleep(0.05)
    assert rec.texts() == []  # the run due while paused is skipped, not reported
    due = resumed.due(await scheduler.book.state(spec.id))
    assert due is not None and due > utcnow()


def test_due_follows_state_and_resume(make: Callable[[str], Scheduler]) -> None:
    scheduler = make("a")
    now = utcnow()
    schedule = scheduler.parse("every 1h")
    spec = JobSpec(
        id="j",
        kind=JobKind.MESSAGE,
        text="t",
        when="every 1h",
        schedule=schedule,
        target=TEAM,
        creator=ALICE,
        created_at=now,
        first_run=schedule.start or now,
    )
    assert spec.due(JobState()) == spec.first_run
    later = spec.first_run + timedelta(hours=3)
    assert spec.due(JobState(next_run=later, last_slot=spec.first_run)) == later
    assert spec.due(JobState(next_run=None, last_slot=spec.first_run)) is None
    resumed = spec.model_copy(update={"resumed_at": later + timedelta(minutes=30)})
    assert resumed.due(JobState(next_run=later, last_slot=spec.first_run)) == later + timedelta(
        hours=1
    )
