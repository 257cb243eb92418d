"""The cron tools: the model schedules reminders and prompts for the chat it is talking in, lists,
removes, pauses and resumes them. People see and manage their own chat's jobs; admins all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import Field

from gateway.sdk import (
    ChatRef,
    DeliveryTargets,
    JobError,
    JobKind,
    JobSpec,
    Scheduler,
    TargetError,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
    describe_job,
    local_time,
)
from tools.args import ToolArgs

GROUP = "cron"

WHEN_HELP = (
    "When to run: a date-time ('2026-12-01 09:00', ISO with offset works too), a delay "
    "('in 10 minutes', '10m', '1h30m'), a day and time ('tomorrow 9:00', 'monday 8am'), an "
    "interval ('every 2h'), a recurring time ('every weekday 8:30', 'every mon,thu 18:00') or a "
    "5-field cron expression ('30 8 * * 1-5', weekday 0 and 7 = Sunday)."
)


class ScheduleJobArgs(ToolArgs):
    kind: Literal["message", "agent"] = Field(
        default="message",
        description=(
            "'message' sends `text` verbatim at that time (reminders). 'agent' runs `text` as a "
            "prompt in a fresh conversation at that time and sends the answer (e.g. 'summarize "
            "the open PRs'), so make the prompt self-contained."
        ),
    )
    text: str = Field(description="The message to send, or the prompt to run.")
    when: str = Field(description=WHEN_HELP)
    timezone: str = Field(
        default="",
        description="IANA time zone of `when`, e.g. Europe/Berlin. Empty: the gateway's default.",
    )
    deliver_to: str = Field(
        default="",
        description=(
            "Deliver somewhere else than this chat: a home channel's name (e.g. 'team') or a "
            "chat address like 'slack:C0123'. Empty: this chat."
        ),
    )


class ListJobsArgs(ToolArgs):
    all_chats: bool = Field(
        default=False, description="Admins only: list the jobs of every chat, not just this one."
    )


class JobIdArgs(ToolArgs):
    job_id: str = Field(description="The job id, as list_jobs shows it.")


class CronTools(ToolFamily):
    """The cron tools; without a scheduler (offline listings) they explain they cannot run."""

    name = "cron"

    def __init__(self, scheduler: Scheduler | None, targets: DeliveryTargets | None = None) -> None:
        self.scheduler = scheduler
        self.targets = targets

    def need(self) -> Scheduler:
        if self.scheduler is None:
            raise ToolError("scheduling is not available in this process")
        return self.scheduler

    async def schedule_job(self, args: ScheduleJobArgs, ctx: ToolContext) -> str:
        deliver_to = await self._destination(args.deliver_to, ctx)
        try:
            spec = await self.need().create(
                kind=JobKind(args.kind),
                text=args.text,
                when=args.when,
                timezone=args.timezone,
                chat=ctx.chat,
                user=ctx.user,
                deliver_to=deliver_to,
            )
        except JobError as exc:
            raise ToolError(f"not scheduled: {exc}") from None
        where = f"to {deliver_to.address}" if deliver_to is not None else "to this chat"
        return (
            f"Scheduled job {spec.id} ({spec.kind.value}), {spec.schedule.describe()}; first run "
            f"{local_time(spec.first_run, spec.schedule.tz)}. It is delivered {where}."
        )

    async def _destination(self, target: str, ctx: ToolContext) -> ChatRef | None:
        if not target.strip():
            return None
        if self.targets is None:
            raise ToolError("not scheduled: delivering elsewhere is not available here")
        try:
            chats = await self.targets.resolve(target, user=ctx.user, here=ctx.chat)
        except TargetError as exc:
            raise ToolError(f"not scheduled: {exc}") from None
        if len(chats) != 1:
            raise ToolError("not scheduled: deliver_to names one chat (a home channel or a chat)")
        chat = chats[0]
        same = chat.platform == ctx.chat.platform and chat.chat_id == ctx.chat.chat_id
        return None if same and chat.thread_id == ctx.chat.thread_id else chat

    async def list_jobs(self, args: ListJobsArgs, ctx: ToolContext) -> str:
        sched = self.need()
        if args.all_chats and not sched.is_admin(ctx.user):
            raise ToolError("only admins can list other chats' jobs; call without all_chats")
        found = await sched.jobs(None if args.all_chats else ctx.chat)
        if not found:
            return "No scheduled jobs" + ("." if args.all_chats else " in this chat.")
        lines = [describe_job(spec, state, with_chat=args.all_chats) for spec, state in found]
        return f"{len(lines)} job(s):\n" + "\n".join(lines)

    async def remove_job(self, args: JobIdArgs, ctx: ToolContext) -> str:
        spec = await _act(self.need().remove, args, ctx)
        return f"Removed job {spec.id} ({spec.preview})."

    async def pause_job(self, args: JobIdArgs, ctx: ToolContext) -> str:
        spec = await _act(self.need().pause, args, ctx)
        return f"Paused job {spec.id}; runs that fall due while paused are skipped."

    async def resume_job(self, args: JobIdArgs, ctx: ToolContext) -> str:
        sched = self.need()
        spec = await _act(sched.resume, args, ctx)
        due = await sched.next_run_of(spec)
        when = local_time(due, spec.schedule.tz) if due else "not scheduled"
        return f"Resumed job {spec.id}; next run {when}."

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="schedule_job",
                description=(
                    "Schedule a reminder (kind 'message') or a prompt you will run later (kind "
                    "'agent'): once, after a delay, at an interval or on a cron schedule, "
                    "delivered to this chat or to deliver_to (a home channel, another chat)."
                ),
                args=ScheduleJobArgs,
                handler=self.schedule_job,
                group=GROUP,
                side_effects=True,
            ),
            ToolSpec(
                name="list_jobs",
                description="List this chat's scheduled jobs with their ids and next run times.",
                args=ListJobsArgs,
                handler=self.list_jobs,
                group=GROUP,
            ),
            ToolSpec(
                name="remove_job",
                description="Remove a scheduled job of this chat by id.",
                args=JobIdArgs,
                handler=self.remove_job,
                group=GROUP,
                side_effects=True,
            ),
            ToolSpec(
                name="pause_job",
                description="Pause a scheduled job of this chat by id (it keeps its schedule).",
                args=JobIdArgs,
                handler=self.pause_job,
                group=GROUP,
                side_effects=True,
            ),
            ToolSpec(
                name="resume_job",
                description="Resume a paused job of this chat by id.",
                args=JobIdArgs,
                handler=self.resume_job,
                group=GROUP,
                side_effects=True,
            ),
        ]


async def _act(
    action: Callable[..., Awaitable[JobSpec]], args: JobIdArgs, ctx: ToolContext
) -> JobSpec:
    try:
        spec = await action(args.job_id, user=ctx.user, chat=ctx.chat)
    except JobError as exc:
        raise ToolError(str(exc)) from None
    return spec
