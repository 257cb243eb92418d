"""Scheduled jobs end to end: real gateways (router, agent loop, scheduler, store) with the
scripted LLM and recording adapters, on the embedded store and on a private redis-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.scheduling.jobs import JobKind, RunRecord, RunStatus
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, UserRef
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.recording_adapter import RecordingAdapter
from tests.harness import Harness, eventually, gateway_settings, running_gateway

FAST = {
    "leader_ttl": 1.0,
    "misfire_grace_seconds": 3.0,
    "min_interval_seconds": 1.0,
    "retry_base_delay": 0.01,
    "retry_max_delay": 0.05,
    "resync_seconds": 1.0,
}
ALICE = UserRef(platform="rec", user_id="alice", display_name="Alice")
TEAM_THREAD = ChatRef(platform="rec", chat_id="team", thread_id="t42", kind=ChatKind.GROUP)


@pytest.fixture(params=["embedded", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def settings_for(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str = "", key_prefix: str = "", **scheduler: Any
) -> Settings:
    return gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        scheduler={**FAST, **scheduler},
        access={"rate_limit_per_minute": 0, "admins": ["rec:boss"]},
    )


async def settles(read: Callable[[], Awaitable[object]], want: object, within: float = 3.0) -> None:
    """Wait until `await read()` returns `want` (store writes that follow a delivery)."""
    deadline = time.monotonic() + within
    while (got := await read()) != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"still {got!r}, wanted {want!r}")
        await asyncio.sleep(0.02)


async def leader(*gateways: Harness) -> Harness:
    await eventually(lambda: any(g.app.scheduler.is_leader for g in gateways))
    return next(g for g in gateways if g.app.scheduler.is_leader)


def say_in(chat: ChatRef, text: str, user: UserRef = ALICE) -> Inbound:
    return Inbound(event_id=uuid.uuid4().hex, chat=chat, sender=user, text=text, mentioned=True)


def job_id_in(reply: str | None) -> str:
    assert reply is not None and reply.startswith("Reminder "), reply
    return reply.split()[1]


async def runs_of(gw: Harness, job_id: str) -> list[RunRecord]:
    return await gw.app.scheduler.book.runs(job_id)


async def test_reminder_arrives_in_its_chat_and_thread(
    tmp_path: Path, llm: ScriptedLLM, backend: str, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    rec = RecordingAdapter()
    async with running_gateway(settings_for(tmp_path, llm, redis_url), adapters=[rec]) as gw:
        await leader(gw)
        submission = await gw.app.admission.submit(say_in(TEAM_THREAD, "/remind 2s stretch"))
        outcome = await submission.done
        job = job_id_in(outcome.reply)
        spec = await gw.app.scheduler.book.get(job)
        assert spec is not None and spec.target == TEAM_THREAD

        sent = await rec.wait_for(2, within=6)
        arrived = time.time()
        reminder = sent[1]
        assert reminder.text == "Reminder for Alice: stretch"
        assert (reminder.chat.chat_id, reminder.chat.thread_id) == ("team", "t42")
        assert 0 <= arrived - spec.first_run.timestamp() < 1.5
        assert gw.texts == []  # nothing leaked into another chat
        await settles(lambda: gw.app.scheduler.book.exists(job), False)  # a fired one-shot is done
        (run,) = await runs_of(gw, job)
        assert run.status is RunStatus.DELIVERED and run.slot == spec.first_run
        assert run.message_id is not None and run.message_id.startswith("rec-")
        await asyncio.sleep(1.2)  # a resync must not fire it again
        assert len(rec.sent) == 2


async def test_agent_job_runs_a_fresh_turn_and_delivers_its_answer(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    async with running_gateway(settings_for(tmp_path, llm)) as gw:
        await leader(gw)
        llm.push(
            Reply.call(
                "schedule_job", kind="agent", text="Summarize the open PRs.", when="in 2 seconds"
            ),
            Reply.text("Done: I will summarize them in 2 seconds."),
            Reply.text("There are 3 open PRs."),
        )
        reply = (await gw.say("summarize the PRs in 2 s")).reply or ""
        assert reply.startswith("Done")
        await eventually(lambda: "There are 3 open PRs." in gw.texts, within=6)
        scheduled = llm.requests[2]
        assert "Summarize the open PRs." in last_user_text(scheduled)
        contents = " ".join(str(m.get("content")) for m in scheduled["messages"])
        assert "summarize the PRs in 2 s" not in contents  # a fresh session, not the chat's
        # The cron tools are offered (on demand: named by load_tools, loaded when called).
        assert "schedule_job" in json.dumps(scheduled["tools"])
        await settles(gw.app.scheduler.book.all, [])  # a finished one-shot is removed
        sessions = await gw.app.store.hgetall("chat_sessions:console:chat1")
        assert not [k for k in sessions if "cron." in k]  # the run's session was cleaned up


async def test_agent_job_that_fails_still_delivers_the_error_line(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    async with running_gateway(settings_for(tmp_path, llm)) as gw:
        await leader(gw)
        spec = await gw.app.scheduler.create(
            kind=JobKind.AGENT,
            text="Check the build.",
            when="1s",
            chat=gw.console.chat,
            user=gw.console.user,
        )
        llm.push(*[Reply.error(500, "model crashed")] * 3)
        await eventually(lambda: len(gw.texts) == 1, within=8)
        await settles(lambda: gw.app.scheduler.book.exists(spec.id), False)
        (run,) = await runs_of(gw, spec.id)
        assert run.status is RunStatus.TURN_FAILED and run.message_id and run.error
        assert gw.texts == [run.error]


async def test_gateway_down_at_fire_time_fires_once_at_restart(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = settings_for(tmp_path, llm)
    async with running_gateway(settings) as gw:
        await leader(gw)
        job = job_id_in((await gw.say("/remind 1s ping")).reply)
        ticker = await gw.app.scheduler.create(
            kind=JobKind.MESSAGE,
            text="tick",
            when="every 1s",
            chat=gw.console.chat,
            user=gw.console.user,
        )
    await asyncio.sleep(2.5)  # both are due now (the ticker twice), within the 3 s grace

    async with running_gateway(settings) as gw:
        await eventually(lambda: gw.texts.count("Reminder: ping") == 1 and "tick" in gw.texts, 5)
        first_ticks = gw.texts.count("tick")
        await asyncio.sleep(1.3)
        assert gw.texts.count("Reminder: ping") == 1
        assert first_ticks == 1  # the missed ticks were coalesced into one run
        assert gw.texts.count("tick") >= 2  # and the ticker goes on
        (run,) = await runs_of(gw, job)
        assert run.status is RunStatus.DELIVERED
        slots = [r.slot for r in await runs_of(gw, ticker.id)]
        assert len(slots) == len(set(slots))


async def test_run_missed_beyond_the_grace_is_reported_not_dropped(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = settings_for(tmp_path, llm, misfire_grace_seconds=1.0)
    async with running_gateway(settings) as gw:
        await leader(gw)
        job = job_id_in((await gw.say("/remind 1s ping")).reply)
    await asyncio.sleep(2.5)

    async with running_gateway(settings) as gw:
        await eventually(lambda: len(gw.texts) == 1, within=5)
        (notice,) = gw.texts
        assert notice.startswith(f"Missed reminder \u201cReminder: ping\u201d (job {job}): ")
        assert "it was due at" in notice and "I was not running then" in notice
        await settles(lambda: gw.app.scheduler.book.exists(job), False)  # reported: removed
        (run,) = await runs_of(gw, job)
        assert run.status is RunStatus.MISSED and run.message_id
        await asyncio.sleep(1.2)
        assert len(gw.texts) == 1


async def test_two_gateways_on_one_redis_fire_each_run_once(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    prefix = f"two-{uuid.uuid4().hex[:8]}"
    first = settings_for(tmp_path / "a", llm, redis_url, prefix)
    second = settings_for(tmp_path / "b", llm, redis_url, prefix)
    async with running_gateway(first) as a, running_gateway(second) as b:
        assert a.app.instance_id != b.app.instance_id
        boss = await leader(a, b)
        other = b if boss is a else a
        # Created in the process that does not run the scheduler: the leader hears of it.
        job = job_id_in((await other.say("/remind 1s once only")).reply)
        ticker = await other.app.scheduler.create(
            kind=JobKind.MESSAGE,
            text="tick",
            when="every 1s",
            chat=other.console.chat,
            user=other.console.user,
        )
        await asyncio.sleep(3.6)
        await other.app.scheduler.remove(
            ticker.id, user=other.console.user, chat=other.console.chat
        )
        await asyncio.sleep(0.3)
        both = a.texts + b.texts
        assert both.count("Reminder: once only") == 1
        assert boss.texts.count("Reminder: once only") == 1
        ticks = await runs_of(a, ticker.id)
        assert both.count("tick") == len(ticks) >= 3
        assert len({r.slot for r in ticks}) == len(ticks)
        assert {r.instance for r in ticks} == {boss.app.instance_id}
        (run,) = await runs_of(a, job)
        assert run.instance == boss.app.instance_id


async def test_graceful_handover_to_the_other_gateway(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    prefix = f"handover-{uuid.uuid4().hex[:8]}"
    a_ctx = running_gateway(settings_for(tmp_path / "a", llm, redis_url, prefix))
    b_ctx = running_gateway(settings_for(tmp_path / "b", llm, redis_url, prefix))
    async with contextlib.AsyncExitStack() as stack:
        a = await stack.enter_async_context(a_ctx)
        await leader(a)
        b = await stack.enter_async_context(b_ctx)
        job = await b.app.scheduler.create(
            kind=JobKind.MESSAGE,
            text="tock",
            when="every 1s",
            chat=b.console.chat,
            user=b.console.user,
        )
        await eventually(lambda: "tock" in a.texts, within=4)
        await a_ctx.__aexit__(None, None, None)  # the leader leaves and releases its lease
        stopped = time.monotonic()
        await eventually(lambda: "tock" in b.texts, within=4)
        assert time.monotonic() - stopped < 2.5
        slots = [r.slot for r in await runs_of(b, job.id)]
        assert len(slots) == len(set(slots))
        stack.pop_all()
        await b_ctx.__aexit__(None, None, None)


async def test_jobs_listing_is_scoped_per_chat_and_removal_works(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    async with running_gateway(settings_for(tmp_path, llm)) as gw:
        await leader(gw)
        one = job_id_in((await gw.say("/remind 10m stretch")).reply)
        two = job_id_in((await gw.say("/remind every weekday 8:30 standup")).reply)
        bobs = job_id_in((await gw.say("/remind tomorrow 9:00 call Ana", chat_id="chat2")).reply)

        mine = (await gw.say("/jobs")).reply or ""
        assert one in mine and two in mine and bobs not in mine
        assert "every weekday 8:30" in mine and "Reminder: standup" in mine
        theirs = (await gw.say("/jobs", chat_id="chat2")).reply or ""
        assert bobs in theirs and one not in theirs
        refused = (await gw.say("/jobs all")).reply or ""
        assert refused.startswith("Only admins")

        assert (await gw.say(f"/unremind {bobs}")).reply == (
            f"There is no job '{bobs}' in this chat; list the chat's jobs to see their ids."
        )
        assert (await gw.say(f"/unremind {bobs}", chat_id="chat2")).reply == (
            f"Removed job {bobs}: Reminder: call Ana"
        )
        # A removed reminder never fires.
        soon = job_id_in((await gw.say("/remind 1s never")).reply)
        assert (await gw.say(f"/unremind {soon}")).reply is not None
        await asyncio.sleep(1.8)
        assert "Reminder: never" not in gw.texts
        assert await runs_of(gw, soon) == []


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ("61 * * * * standup", "Invalid cron expression '61 * * * *': minute field '61'"),
        ("2020-01-01 09:00 standup", "is in the past"),
        ("tomorrow 9:00 Mars/Base call", "Unknown timezone 'Mars/Base'"),
        ("every 0.5s blink", "Every 0.5 s is too often; the shortest interval allowed is 1 s"),
        ("someday call Ana", "I do not understand the time"),
    ],
)
async def test_remind_explains_invalid_input(
    tmp_path: Path, llm: ScriptedLLM, args: str, problem: str
) -> None:
    async with running_gateway(settings_for(tmp_path, llm)) as gw:
        reply = (await gw.say(f"/remind {args}")).reply or ""
        assert reply.startswith(problem) or problem in reply.split("\n")[0], reply
        assert "Usage: /remind <when> <text>" in reply
        assert await gw.app.scheduler.book.all() == []
        assert ((await gw.say("/remind")).reply or "").startswith("Usage:")


async def test_remind_refuses_more_jobs_than_the_chat_limit(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    async with running_gateway(settings_for(tmp_path, llm, max_jobs_per_chat=2)) as gw:
        for _ in range(2):
            job_id_in((await gw.say("/remind 1h water")).reply)
        reply = (await gw.say("/remind 1h water")).reply or ""
        assert reply.startswith("This chat already has 2 scheduled jobs, the most allowed")


async def test_failed_delivery_is_reported_once_to_the_admins(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    rec = RecordingAdapter()
    rec.unreachable.add("gone")
    gone = ChatRef(platform="rec", chat_id="gone", kind=ChatKind.GROUP)
    async with running_gateway(settings_for(tmp_path, llm), adapters=[rec]) as gw:
        await leader(gw)
        job = await gw.app.scheduler.create(
            kind=JobKind.MESSAGE, text="ping", when="every 1s", chat=gone, user=ALICE
        )
        for _ in range(120):
            if len(runs := await runs_of(gw, job.id)) >= 3:
                break
            await asyncio.sleep(0.05)
        assert len(runs) >= 3 and {r.status for r in runs} == {RunStatus.FAILED}
        assert all("blocked" in (r.error or "") for r in runs)
        reports = [o for o in rec.sent if o.chat.chat_id == "boss"]
        assert len(reports) == 1  # once per streak of failures, not once per run
        assert reports[0].chat.kind is ChatKind.DIRECT
        assert reports[0].text.startswith(
            f"Scheduled job {job.id} for rec:gone (made by rec:alice)"
        )
        rec.unreachable.clear()
        await eventually(lambda: "ping" in rec.texts("gone"), within=3)
        await asyncio.sleep(0.2)
        assert not (await gw.app.scheduler.book.state(job.id)).failure_reported
