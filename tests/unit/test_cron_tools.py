"""The cron tools and the scheduler's job API: validation, per-chat scope, admins, pause/resume,
and the courier's retries and failure reports. No leader runs here; timing is in tests/e2e."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.config import SchedulerSettings
from gateway.intake.admission import Submission
from gateway.scheduling.delivery import Courier
from gateway.scheduling.jobs import JobKind, JobSpec, utcnow
from gateway.scheduling.scheduler import JobError, Scheduler
from gateway.sdk.channels import DeliveryError, Outbox
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, Outbound, UserRef
from gateway.sdk.tooling import ToolContext, ToolError, ToolSpec
from gateway.sessions.key import SessionKey
from gateway.store.embedded import EmbeddedStore
from tests.fakes.recording_adapter import RecordingAdapter
from tools.schedule.cron import CronTools, JobIdArgs, ListJobsArgs, ScheduleJobArgs

ALICE = UserRef(platform="rec", user_id="alice", display_name="Alice")
BOB = UserRef(platform="rec", user_id="bob", display_name="Bob")
BOSS = UserRef(platform="rec", user_id="boss", display_name="Boss")
TEAM = ChatRef(platform="rec", chat_id="team", thread_id="t7", kind=ChatKind.GROUP)
OTHER = ChatRef(platform="rec", chat_id="other", kind=ChatKind.GROUP)


async def _no_submit(inbound: Inbound) -> Submission:
    raise AssertionError("no turn should run in these tests")


async def _no_forget(key: SessionKey) -> None:
    return None


@pytest.fixture
async def scheduler(tmp_path: Path) -> AsyncIterator[Scheduler]:
    store = EmbeddedStore(tmp_path / "data")
    outbox = Outbox()
    outbox.register(RecordingAdapter())
    settings = SchedulerSettings(
        max_jobs_per_chat=3, min_interval_seconds=300, default_timezone="Europe/Berlin"
    )
    yield Scheduler(
        settings,
        store=store,
        outbox=outbox,
        submit=_no_submit,
        forget_session=_no_forget,
        is_admin=lambda user: user == BOSS,
        admins=["rec:boss"],
        instance_id="unit",
        turn_timeout=5,
    )
    await store.close()


@pytest.fixture
def tools(scheduler: Scheduler) -> dict[str, ToolSpec[Any]]:
    return {tool.name: tool for tool in CronTools(scheduler).specs()}


def ctx(chat: ChatRef = TEAM, user: UserRef = ALICE) -> ToolContext:
    return ToolContext(session=SessionKey(chat.platform, chat.chat_id), chat=chat, user=user)


async def schedule(
    tools: dict[str, ToolSpec[Any]], where: ToolContext | None = None, /, **args: Any
) -> str:
    args.setdefault("text", "stand up")
    args.setdefault("when", "every weekday 8:30")
    return await tools["schedule_job"].handler(ScheduleJobArgs(**args), where or ctx())


def job_id(result: str) -> str:
    return result.split()[2]


async def test_schedule_stores_the_target_chat_and_thread(
    tools: dict[str, ToolSpec[Any]], scheduler: Scheduler
) -> None:
    result = await schedule(tools)
    assert result.startswith("Scheduled job ") and "cron '30 8 * * 1-5' (Europe/Berlin)" in result
    spec = await scheduler.book.get(job_id(result))
    assert spec is not None
    assert (spec.target, spec.creator, spec.kind) == (TEAM, ALICE, JobKind.MESSAGE)
    assert spec.target.address == "rec:team/t7"
    assert spec.first_run.astimezone(spec.schedule.tz).strftime("%H:%M") == "08:30"


async def test_agent_jobs_and_explicit_timezones(
    tools: dict[str, ToolSpec[Any]], scheduler: Scheduler
) -> None:
    result = await schedule(
        tools, kind="agent", text="list open PRs", when="tomorrow 9:00", timezone="Asia/Tokyo"
    )
    spec = await scheduler.book.get(job_id(result))
    assert spec is not None and spec.kind is JobKind.AGENT
    assert spec.schedule.timezone == "Asia/Tokyo" and "JST" in result


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"when": "61 * * * *"}, "invalid cron expression '61 * * * *': minute field"),
        ({"when": "0 9 * * 9"}, "day-of-week field '9'"),
        ({"when": "2020-01-01 09:00"}, "is in the past"),
        ({"when": "tomorrow 9:00", "timezone": "Europe/Berln"}, "unknown timezone 'Europe/Berln'"),
        ({"when": "every 2m"}, "too often; the shortest interval allowed is 5 min"),
        ({"when": "*/2 * * * *"}, "the shortest interval allowed is 5 min"),
        ({"when": "soonish"}, "I do not understand the time"),
        ({"text": "   "}, "needs a text"),
        ({"text": "x" * 5000}, "keep it under 4,000"),
    ],
)
async def test_invalid_requests_get_errors_the_model_can_act_on(
    tools: dict[str, ToolSpec[Any]], args: dict[str, str], message: str
) -> None:
    with pytest.raises(ToolError, match="not scheduled: ") as err:
        await schedule(tools, **args)
    assert message in str(err.value)


async def test_per_chat_limit(tools: dict[str, ToolSpec[Any]]) -> None:
    for _ in range(3):
        await schedule(tools)
    with pytest.raises(ToolError, match="already has 3 scheduled jobs, the most allowed"):
        await schedule(tools)
    # Threads share their chat's budget; other chats have their own.
    with pytest.raises(ToolError, match="already has 3"):
        await schedule(tools, ctx(TEAM.without_thread()))
    assert (await schedule(tools, ctx(OTHER, BOB))).startswith("Scheduled job")


async def test_listing_is_scoped_to_the_chat_and_admins_see_all(
    tools: dict[str, ToolSpec[Any]],
) -> None:
    team_job = job_id(await schedule(tools, text="team standup"))
    other_job = job_id(await schedule(tools, ctx(OTHER, BOB), text="other retro"))
    listing = tools["list_jobs"].handler

    team = await listing(ListJobsArgs(), ctx())
    assert team_job in team and "team standup" in team
    assert other_job not in team and "retro" not in team
    other = await listing(ListJobsArgs(), ctx(OTHER, BOB))
    assert other_job in other and team_job not in other

    with pytest.raises(ToolError, match="only admins"):
        await listing(ListJobsArgs(all_chats=True), ctx())
    every = await listing(ListJobsArgs(all_chats=True), ctx(OTHER, BOSS))
    assert team_job in every and other_job in every and "in rec:team/t7" in every
    assert await listing(ListJobsArgs(), ctx(ChatRef(platform="rec", chat_id="empty"))) == (
        "No scheduled jobs in this chat."
    )


async def test_removal_only_from_the_jobs_own_chat_or_by_an_admin(
    tools: dict[str, ToolSpec[Any]], scheduler: Scheduler
) -> None:
    first = job_id(await schedule(tools))
    second = job_id(await schedule(tools))
    remove = tools["remove_job"].handler

    with pytest.raises(ToolError, match=f"there is no job '{first}' in this chat"):
        await remove(JobIdArgs(job_id=first), ctx(OTHER, BOB))
    assert await scheduler.book.exists(first)

    assert "Removed job" in await remove(JobIdArgs(job_id=first), ctx(TEAM, BOB))
    assert not await scheduler.book.exists(first)
    assert "Removed job" in await remove(JobIdArgs(job_id=second), ctx(OTHER, BOSS))
    with pytest.raises(ToolError, match="no job"):
        await remove(JobIdArgs(job_id=second), ctx())
    assert "No scheduled jobs" in await tools["list_jobs"].handler(ListJobsArgs(), ctx())


async def test_pause_and_resume(tools: dict[str, ToolSpec[Any]], scheduler: Scheduler) -> None:
    job = job_id(await schedule(tools))
    args = JobIdArgs(job_id=job)
    assert "Paused job" in await tools["pause_job"].handler(args, ctx())
    assert "(paused)" in await tools["list_jobs"].handler(ListJobsArgs(), ctx())
    with pytest.raises(ToolError, match="already paused"):
        await tools["pause_job"].handler(args, ctx())
    resumed = await tools["resume_job"].handler(args, ctx())
    assert "Resumed job" in resumed and "08:30" in resumed
    spec = await scheduler.book.get(job)
    assert spec is not None and not spec.paused and spec.resumed_at is not None
    with pytest.raises(ToolError, match="is not paused"):
        await tools["resume_job"].handler(args, ctx())


async def test_resuming_a_one_shot_whose_time_passed_is_refused(scheduler: Scheduler) -> None:
    spec = await scheduler.create(
        kind=JobKind.MESSAGE, text="hi", when="10m", chat=TEAM, user=ALICE
    )
    past = utcnow() - timedelta(minutes=1)
    paused = spec.model_copy(
        update={
            "paused": True,
            "first_run": past,
            "schedule": spec.schedule.model_copy(update={"at": past}),
        }
    )
    await scheduler.book.put(paused)
    with pytest.raises(JobError, match="passed while it was paused; remove it"):
        await scheduler.resume(spec.id, user=ALICE, chat=TEAM)


async def test_without_a_scheduler_the_tools_say_so() -> None:
    tools = {tool.name: tool for tool in CronTools(None).specs()}
    assert set(tools) == {"schedule_job", "list_jobs", "remove_job", "pause_job", "resume_job"}
    assert {tool.group for tool in tools.values()} == {"cron"}
    with pytest.raises(ToolError, match="not available"):
        await tools["list_jobs"].handler(ListJobsArgs(), ctx())


def test_schedule_job_schema_explains_when() -> None:
    schema = CronTools(None).specs()[0].schema()["function"]["parameters"]
    assert schema["required"] == ["text", "when"]
    assert schema["properties"]["kind"]["enum"] == ["message", "agent"]
    assert "every weekday 8:30" in schema["properties"]["when"]["description"]


# -- the courier: retries, receipts, failure reports ------------------------------------------


def courier(adapter: RecordingAdapter, admins: list[str] | None = None) -> Courier:
    outbox = Outbox()
    outbox.register(adapter)
    return Courier(outbox, attempts=3, base_delay=0.01, max_delay=0.02, admins=admins or [])


async def test_courier_retries_transient_errors_then_delivers() -> None:
    adapter = RecordingAdapter()
    adapter.failures.extend([DeliveryError("502 Bad Gateway"), TimeoutError()])
    delivery = await courier(adapter).send(Outbound(chat=TEAM, text="hi"))
    assert delivery.ok and delivery.attempts == 3 and delivery.sent is not None
    assert delivery.sent.message_id.startswith("rec-")


async def test_courier_gives_up_at_once_on_permanent_errors() -> None:
    adapter = RecordingAdapter()
    adapter.unreachable.add("team")
    delivery = await courier(adapter).send(Outbound(chat=TEAM, text="hi"))
    assert not delivery.ok and delivery.attempts == 1 and "blocked" in (delivery.error or "")


async def test_courier_reports_to_the_chat_else_to_the_admins() -> None:
    adapter = RecordingAdapter()
    told = await courier(adapter, ["rec:boss"]).report(TEAM, "to chat", "to admins")
    assert told == "chat" and adapter.texts() == ["to chat"]

    adapter = RecordingAdapter()
    adapter.unreachable.add("team")
    told = await courier(adapter, ["rec:boss", "slack:U1"]).report(TEAM, "to chat", "to admins")
    assert told == "admins"
    assert [(o.chat.chat_id, o.chat.kind, o.text) for o in adapter.sent] == [
        ("boss", ChatKind.DIRECT, "to admins")
    ]

    adapter = RecordingAdapter()
    adapter.unreachable.update({"team", "boss"})
    assert await courier(adapter, ["rec:boss"]).report(TEAM, "a", "b") == "nobody"


async def test_a_receipt_without_a_message_id_is_not_a_delivery() -> None:
    class Silent(RecordingAdapter):
        async def send(self, out: Outbound) -> Any:
            sent = await super().send(out)
            return sent.model_copy(update={"message_id": ""})

    delivery = await courier(Silent()).send(Outbound(chat=TEAM, text="hi"))
    assert not delivery.ok and delivery.error == "the platform returned no message id"


def test_spec_round_trips_through_json(scheduler: Scheduler) -> None:
    spec = JobSpec(
        id="abcd1234",
        kind=JobKind.AGENT,
        text="t",
        when="10m",
        schedule=scheduler.parse("10m"),
        target=TEAM,
        creator=ALICE,
        created_at=utcnow(),
        first_run=utcnow(),
    )
    assert JobSpec.model_validate_json(spec.model_dump_json()) == spec
