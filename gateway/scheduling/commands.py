"""`/remind`, `/jobs` and `/unremind`: reminders without the LLM, on every platform."""

from __future__ import annotations

from gateway.scheduling.jobs import JobKind, describe_job, utcnow
from gateway.scheduling.scheduler import JobError, Scheduler
from gateway.scheduling.times import WhenError, local_time
from gateway.scheduling.when import split_when
from gateway.sdk.extensions import Command, CommandCall, Extensions
from gateway.sdk.messages import ChatKind

REMIND_USAGE = (
    "Usage: /remind <when> <text>, for example\n"
    "/remind 10m stretch\n"
    "/remind tomorrow 9:00 call Ana\n"
    "/remind 2026-12-01 09:00 standup\n"
    "/remind every weekday 8:30 standup\n"
    "/remind every 2h drink water\n"
    "/remind 30 8 * * 1-5 standup (cron)\n"
    "Add a time zone after the time if needed: /remind tomorrow 9:00 Europe/Berlin call Ana"
)


def register_schedule_commands(extensions: Extensions, scheduler: Scheduler) -> None:
    async def remind(call: CommandCall) -> str:
        if not call.args:
            return REMIND_USAGE
        inbound = call.inbound
        try:
            schedule, when, text = split_when(
                call.args, now=utcnow(), timezone=scheduler.settings.default_timezone
            )
            who = "" if inbound.chat.kind is ChatKind.DIRECT else f" for {inbound.sender.label}"
            spec = await scheduler.create(
                kind=JobKind.MESSAGE,
                text=f"Reminder{who}: {text}",
                when=when,
                schedule=schedule,
                chat=inbound.chat,
                user=inbound.sender,
            )
        except (WhenError, JobError) as exc:
            return f"{_sentence(str(exc))}\n\n{REMIND_USAGE}"
        first = local_time(spec.first_run, spec.schedule.tz)
        repeat = "" if spec.schedule.kind == "once" else f", then {spec.schedule.describe()}"
        return (
            f"Reminder {spec.id} set: {first}{repeat}. Cancel it with /unremind {spec.id}; "
            "/jobs lists this chat's reminders."
        )

    async def jobs(call: CommandCall) -> str:
        every_chat = call.args.strip().lower() == "all"
        if every_chat and not scheduler.is_admin(call.inbound.sender):
            return "Only admins can list the jobs of every chat; /jobs lists this chat's."
        found = await scheduler.jobs(None if every_chat else call.inbound.chat)
        if not found:
            return "No scheduled jobs in this chat. Set a reminder with /remind 10m stretch."
        title = "Scheduled jobs in every chat:" if every_chat else "Scheduled jobs in this chat:"
        lines = [describe_job(spec, state, with_chat=every_chat) for spec, state in found]
        return "\n".join([title, *lines, "Remove one with /unremind ID."])

    async def unremind(call: CommandCall) -> str:
        job_id = call.args.strip()
        if not job_id:
            return "Usage: /unremind ID (/jobs lists the ids)."
        try:
            spec = await scheduler.remove(job_id, user=call.inbound.sender, chat=call.inbound.chat)
        except JobError as exc:
            return _sentence(str(exc)) + "."
        return f"Removed job {spec.id}: {spec.preview}"

    extensions.add_command(Command("remind", "set a reminder: /remind 10m stretch", remind))
    extensions.add_command(Command("jobs", "list this chat's reminders and scheduled jobs", jobs))
    extensions.add_command(Command("unremind", "remove a reminder or job: /unremind ID", unremind))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]
