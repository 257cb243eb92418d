"""Schedules and their run times: time zones, intervals and crontab lines on APScheduler triggers.

Two crontab rules APScheduler 3 does not keep are kept here: weekday 0 and 7 are Sunday (its
`day_of_week` 0 is Monday), and a fixed-time job fires once on the night the clocks go back
(APScheduler alone fires it in both passes of the repeated hour).
"""

from __future__ import annotations

import difflib
import itertools
import math
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from apscheduler.triggers.cron import CronTrigger

_TICK = timedelta(microseconds=1)


class WhenError(ValueError):
    """A "when" the person or the model must fix; the message says how."""

    def __init__(self, message: str, *, rank: int = 2) -> None:
        super().__init__(message)
        # How surely the text meant the form that failed (0: not understood at all). /remind
        # tries several splits of "<when> <text>" and reports the most specific failure.
        self.rank = rank


class Schedule(BaseModel):
    """When a job runs, in plain data (stored as JSON with the job)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["once", "interval", "cron"]
    timezone: str = "UTC"
    at: datetime | None = None  # once
    every_seconds: float | None = None  # interval
    start: datetime | None = None  # interval: the first run
    cron: str | None = None  # 5 crontab fields, crontab meanings

    @property
    def tz(self) -> ZoneInfo:
        return zone(self.timezone)

    @property
    def recurring(self) -> bool:
        return self.kind != "once"

    def describe(self) -> str:
        if self.kind == "once" and self.at is not None:
            return f"once at {local_time(self.at, self.tz)}"
        if self.kind == "interval" and self.every_seconds is not None:
            return f"every {human_duration(self.every_seconds)}"
        return f"cron '{self.cron}' ({self.timezone})"


# -- time zones -----------------------------------------------------------------------------


@cache
def _zone_names() -> dict[str, str]:
    return {name.lower(): name for name in available_timezones()}


def zone(name: str) -> ZoneInfo:
    """The zone for an IANA name (any case); a clear WhenError for unknown names."""
    wanted = name.strip()
    if wanted.upper() in ("UTC", "Z", "GMT"):
        wanted = "UTC"
    real = _zone_names().get(wanted.lower(), wanted)
    try:
        return ZoneInfo(real)
    except (ZoneInfoNotFoundError, ValueError):
        close = difflib.get_close_matches(wanted, list(_zone_names().values()), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise WhenError(
            f"unknown timezone {wanted!r}{hint}; use an IANA name such as Europe/Berlin, "
            "America/New_York or UTC"
        ) from None


def local_time(moment: datetime, tz: ZoneInfo) -> str:
    """`Mon 2026-05-04 08:30 CEST`; seconds only when there are some (short delays)."""
    local = moment.astimezone(tz)
    clock = "%H:%M:%S" if local.second else "%H:%M"
    return local.strftime(f"%a %Y-%m-%d {clock} %Z")


def human_duration(seconds: float) -> str:
    left = round(seconds)
    if left < 60:
        return f"{seconds:g} s"
    parts = []
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min"), (1, "s")):
        amount, left = divmod(left, size)
        if amount:
            parts.append(f"{amount} {unit}")
    return " ".join(parts)


# -- run times --------------------------------------------------------------------------------


def next_run(schedule: Schedule, after: datetime) -> datetime | None:
    """The first run strictly after `after` (UTC), or None when there is none."""
    if schedule.kind == "once":
        assert schedule.at is not None
        return schedule.at if schedule.at > after else None
    if schedule.kind == "interval":
        assert schedule.start is not None and schedule.every_seconds is not None
        if after < schedule.start:
            return schedule.start
        # Exact arithmetic on the anchor, so every process computes the same slots.
        steps = math.floor((after - schedule.start) / timedelta(seconds=schedule.every_seconds))
        return schedule.start + (steps + 1) * timedelta(seconds=schedule.every_seconds)
    assert schedule.cron is not None
    return _next_cron(schedule.cron, schedule.tz, after)


def _next_cron(expr: str, tz: ZoneInfo, after: datetime) -> datetime | None:
    triggers = crontab_triggers(expr, tz)
    fixed_hour = not expr.split()[1].startswith("*")
    # UTC throughout: arithmetic on a local time drops `fold` and can step back an hour.
    moment = after.astimezone(UTC)
    for _ in range(2000):  # at most one skipped repeat per minute of the repeated hour
        times = [t.get_next_fire_time(None, moment + _TICK) for t in triggers]
        found = [t for t in times if t is not None]
        if not found:
            return None
        candidate: datetime = min(found)
        if fixed_hour and _repeated_wall_time(candidate):
            moment = candidate.astimezone(UTC)  # the clocks went back: it already ran once
            continue
        return candidate.astimezone(UTC)
    return None


def _repeated_wall_time(moment: datetime) -> bool:
    """True for the second pass of a wall time that occurs twice (the clocks went back)."""
    return moment.fold == 1 and moment.replace(fold=0).utcoffset() != moment.utcoffset()


def check_schedule(schedule: Schedule, *, now: datetime, min_interval: float) -> datetime:
    """Validate a new schedule; returns its first run or raises a WhenError saying what to fix."""
    tz = schedule.tz
    if schedule.kind == "once":
        assert schedule.at is not None
        if schedule.at <= now:
            raise WhenError(
                f"{local_time(schedule.at, tz)} is in the past (it is now {local_time(now, tz)}); "
                "give a time in the future"
            )
        return schedule.at
    if schedule.kind == "interval":
        assert schedule.every_seconds is not None and schedule.start is not None
        if schedule.every_seconds < min_interval:
            raise WhenError(
                f"every {human_duration(schedule.every_seconds)} is too often; the shortest "
                f"interval allowed is {human_duration(min_interval)}"
            )
        return schedule.start
    first = next_run(schedule, now)
    if first is None:
        raise WhenError(f"the cron expression '{schedule.cron}' never matches a date")
    runs = [first]
    for _ in range(24):
        later = next_run(schedule, runs[-1])
        if later is None:
            break
        runs.append(later)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(runs)]
    if gaps and min(gaps) < min_interval:
        raise WhenError(
            f"the cron expression '{schedule.cron}' runs every {human_duration(min(gaps))} at "
            f"times; the shortest interval allowed is {human_duration(min_interval)}"
        )
    return first


# -- crontab ----------------------------------------------------------------------------------

_FIELDS = (
    ("minute", "minute"),
    ("hour", "hour"),
    ("day-of-month", "day"),
    ("month", "month"),
    ("day-of-week", "day_of_week"),
)
# Index = crontab weekday number (0 = Sunday); the names are APScheduler's too.
_DAY_ABBR = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_DAY_NAMES = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@cache
def crontab_triggers(expr: str, tz: ZoneInfo) -> tuple[CronTrigger, ...]:
    """APScheduler triggers for a 5-field crontab line; raises WhenError naming the bad field.

    When both day-of-month and day-of-week are restricted, crontab runs on either (two
    triggers); APScheduler alone would require both.
    """
    # Imported with the first cron job: a gateway without one does not load APScheduler.
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    if len(fields) != 5:
        raise WhenError(
            f"a cron expression has 5 fields (minute hour day-of-month month day-of-week); "
            f"'{expr}' has {len(fields)}",
            rank=1,
        )
    values = [*fields[:4], crontab_weekdays(fields[4], expr)]
    for (label, key), value in zip(_FIELDS, values, strict=True):
        try:
            CronTrigger(timezone=tz, **{key: value})
        except ValueError as exc:
            raise WhenError(
                f"invalid cron expression '{expr}': {label} field '{value}': {exc}"
            ) from None
    minute, hour, dom, month, dow = values
    base = {"minute": minute, "hour": hour, "month": month, "timezone": tz}
    if not fields[2].startswith("*") and not fields[4].startswith("*"):
        return (CronTrigger(day=dom, **base), CronTrigger(day_of_week=dow, **base))
    return (CronTrigger(day=dom, day_of_week=dow, **base),)


def crontab_weekdays(field: str, expr: str = "") -> str:
    """A crontab day-of-week field (0/7 = Sunday, ranges, lists, steps, names) as APScheduler
    day names, e.g. `1-5` -> `mon,tue,wed,thu,fri`, `0,6` -> `sat,sun`, `*` -> `*`."""
    where = f"invalid cron expression '{expr or field}': day-of-week field '{field}'"
    days: set[int] = set()
    for part in field.lower().split(","):
        body, slash, step_text = part.partition("/")
        if slash and (not step_text.isdigit() or int(step_text) == 0):
            raise WhenError(f"{where}: the step after '/' must be a positive number")
        step = int(step_text) if slash else 1
        if body == "*":
            low, high = 0, 6
        elif "-" in body:
            first, _, last = body.partition("-")
            low, high = _weekday(first, where), _weekday(last, where)
        else:
            low = _weekday(body, where)
            high = 6 if slash else low
        span = list(range(low, high + 1)) if low <= high else [*range(low, 7), *range(high + 1)]
        days.update(day % 7 for day in span[::step])
    if days == set(range(7)):
        return "*"
    return ",".join(_DAY_ABBR[d] for d in sorted(days, key=lambda d: (d - 1) % 7))


def _weekday(token: str, where: str) -> int:
    if token.isdigit() and int(token) <= 7:
        return int(token)
    day = day_number(token)
    if day is None:
        raise WhenError(f"{where}: '{token}' is not a weekday (0-7, 0 and 7 = Sunday; or sun-sat)")
    return day


def day_number(token: str) -> int | None:
    """Crontab number of a weekday name ('mon', 'Tuesday', 'thurs', 'fridays'), else None."""
    word = token.lower().rstrip(".")
    if word.endswith("days"):
        word = word[:-1]
    if len(word) < 3:
        return None
    for number, name in enumerate(_DAY_NAMES):
        if name.startswith(word):
            return number
    return None
