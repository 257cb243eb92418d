"""The "when" language and run times: parsing, crontab weekdays, DST, and every invalid input."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.triggers.cron import CronTrigger

from gateway.config import ConfigError, load_settings
from gateway.scheduling.times import (
    Schedule,
    WhenError,
    check_schedule,
    crontab_weekdays,
    local_time,
    next_run,
)
from gateway.scheduling.when import parse_when, split_when

# A Friday, 10:00 UTC.
NOW = datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def when(text: str, tz: str = "UTC", now: datetime = NOW) -> Schedule:
    return parse_when(text, now=now, timezone=tz)


def runs(schedule: Schedule, start: datetime, end: datetime) -> list[datetime]:
    out: list[datetime] = []
    moment = start
    while (nxt := next_run(schedule, moment)) is not None and nxt < end:
        out.append(nxt)
        moment = nxt
    return out


def cron(expr: str, tz: str = "UTC") -> Schedule:
    return Schedule(kind="cron", cron=expr, timezone=tz)


# -- parsing ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "at"),
    [
        ("10m", NOW + timedelta(minutes=10)),
        ("in 10 minutes", NOW + timedelta(minutes=10)),
        ("1h30m", NOW + timedelta(minutes=90)),
        ("in an hour", NOW + timedelta(hours=1)),
        ("2 days and 3 hours", NOW + timedelta(days=2, hours=3)),
        ("45s", NOW + timedelta(seconds=45)),
        ("2026-12-01 09:00", datetime(2026, 12, 1, 9, tzinfo=UTC)),
        ("2026-12-01T09:00:00Z", datetime(2026, 12, 1, 9, tzinfo=UTC)),
        ("2026-12-01T09:00+02:00", datetime(2026, 12, 1, 7, tzinfo=UTC)),
        ("2026-12-01 at 9am", datetime(2026, 12, 1, 9, tzinfo=UTC)),
        ("tomorrow 9:00", datetime(2026, 5, 2, 9, tzinfo=UTC)),
        ("tomorrow at 9", datetime(2026, 5, 2, 9, tzinfo=UTC)),
        ("today 18:30", datetime(2026, 5, 1, 18, 30, tzinfo=UTC)),
        ("at 9:00", datetime(2026, 5, 2, 9, tzinfo=UTC)),  # nine has passed: tomorrow
        ("9:30pm", datetime(2026, 5, 1, 21, 30, tzinfo=UTC)),
        ("noon", datetime(2026, 5, 1, 12, tzinfo=UTC)),
        ("monday 9:00", datetime(2026, 5, 4, 9, tzinfo=UTC)),
        ("next fri at 5pm", datetime(2026, 5, 1, 17, tzinfo=UTC)),
        ("friday 8:00", datetime(2026, 5, 8, 8, tzinfo=UTC)),  # this Friday's 8:00 has passed
    ],
)
def test_one_shot_forms(text: str, at: datetime) -> None:
    schedule = when(text)
    assert schedule.kind == "once" and schedule.at == at


def test_a_zone_applies_to_wall_times_and_may_trail_the_text() -> None:
    assert when("tomorrow 9:00", "Europe/Berlin").at == datetime(2026, 5, 2, 7, tzinfo=UTC)
    trailing = when("2026-12-01 9am Europe/Berlin")
    assert trailing.timezone == "Europe/Berlin"
    assert trailing.at == datetime(2026, 12, 1, 8, tzinfo=UTC)  # CET in winter
    assert when("tomorrow 9:00 europe/berlin").timezone == "Europe/Berlin"


@pytest.mark.parametrize(
    ("text", "expr"),
    [
        ("every weekday 8:30", "30 8 * * 1-5"),
        ("every weekday at 8:30", "30 8 * * 1-5"),
        ("weekdays 8:30", "30 8 * * 1-5"),
        ("every day at 9", "0 9 * * *"),
        ("daily 7:15", "15 7 * * *"),
        ("every weekend 10am", "0 10 * * 0,6"),
        ("every mon, thu 18:00", "0 18 * * 1,4"),
        ("every monday and friday at 9:30", "30 9 * * 1,5"),
        ("mondays 9:00", "0 9 * * 1"),
        ("every sunday 20:00", "0 20 * * 0"),
        ("30 8 * * 1-5", "30 8 * * 1-5"),
        ("cron 0 9 * * 0", "0 9 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
    ],
)
def test_recurring_forms_become_crontab_lines(text: str, expr: str) -> None:
    schedule = when(text)
    assert schedule.kind == "cron" and schedule.cron == expr


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("every 2h", 7200), ("every hour", 3600), ("every 10 minutes", 600), ("hourly", 3600)],
)
def test_intervals(text: str, seconds: float) -> None:
    schedule = when(text)
    assert schedule.kind == "interval" and schedule.every_seconds == seconds
    assert schedule.start == NOW + timedelta(seconds=seconds)
    assert next_run(schedule, schedule.start) == NOW + timedelta(seconds=2 * seconds)


@pytest.mark.parametrize(
    ("text", "when_words", "rest"),
    [
        ("10m stretch", "10m", "stretch"),
        ("2026-12-01 09:00 standup", "2026-12-01 09:00", "standup"),
        ("every weekday 8:30 standup", "every weekday 8:30", "standup"),
        ("tomorrow 9:00 call Ana", "tomorrow 9:00", "call Ana"),
        ("in 10 minutes 5 pushups", "in 10 minutes", "5 pushups"),
        ("30 8 * * 1-5 standup meeting", "30 8 * * 1-5", "standup meeting"),
        ("tomorrow 9:00 Europe/Berlin call Ana", "tomorrow 9:00 Europe/Berlin", "call Ana"),
        ("at 5 pm pick up the kids", "at 5 pm", "pick up the kids"),
    ],
)
def test_remind_arguments_split_into_when_and_text(text: str, when_words: str, rest: str) -> None:
    _, words, left = split_when(text, now=NOW)
    assert (words, left) == (when_words, rest)


def test_remind_split_reports_the_most_specific_problem() -> None:
    with pytest.raises(WhenError, match="minute field '61'"):
        split_when("61 * * * * standup", now=NOW)
    with pytest.raises(WhenError, match="did you mean Europe/Berlin"):
        split_when("tomorrow 9:00 Europe/Berln call Ana", now=NOW)
    with pytest.raises(WhenError, match="I do not understand the time"):
        split_when("sometime soon call Ana", now=NOW)
    with pytest.raises(WhenError, match="say when and what"):
        split_when("10m", now=NOW)


# -- crontab weekdays -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "aps"),
    [
        ("0", "sun"),
        ("7", "sun"),
        ("1", "mon"),
        ("6", "sat"),
        ("1-5", "mon,tue,wed,thu,fri"),
        ("0,6", "sat,sun"),
        ("*/2", "tue,thu,sat,sun"),  # 0,2,4,6
        ("1-5/2", "mon,wed,fri"),
        ("5-7", "fri,sat,sun"),
        ("0-7", "*"),
        ("*", "*"),
        ("mon-fri", "mon,tue,wed,thu,fri"),
        ("SUN,sat", "sat,sun"),
        ("sat-sun", "sat,sun"),
        ("1/2", "mon,wed,fri"),
    ],
)
def test_crontab_weekday_numbers_mean_what_crontab_means(field: str, aps: str) -> None:
    assert crontab_weekdays(field) == aps


@pytest.mark.parametrize(
    ("dow", "weekdays"),
    [
        ("0", {6}),  # Python weekday(): Monday 0 ... Sunday 6
        ("7", {6}),
        ("1-5", {0, 1, 2, 3, 4}),
        ("0,6", {5, 6}),
        ("*/2", {1, 3, 5, 6}),
        ("sun", {6}),
    ],
)
def test_cron_jobs_fire_on_crontab_weekdays(dow: str, weekdays: set[int]) -> None:
    fired = runs(cron(f"0 9 * * {dow}"), NOW, NOW + timedelta(days=14))
    assert {f.weekday() for f in fired} == weekdays
    assert all(f.hour == 9 and f.minute == 0 for f in fired)


def test_apscheduler_alone_would_read_weekday_0_as_monday() -> None:
    # Why we convert: APScheduler's from_crontab gives "0" its own meaning (Monday).
    trigger = CronTrigger.from_crontab("0 9 * * 0", timezone=UTC)
    assert trigger.get_next_fire_time(None, NOW).weekday() == 0
    ours = next_run(cron("0 9 * * 0"), NOW)
    assert ours is not None and ours.weekday() == 6


def test_day_of_month_and_weekday_both_restricted_means_either() -> None:
    fired = runs(cron("0 9 13 * 5"), NOW, NOW + timedelta(days=31))
    assert all(f.day == 13 or f.weekday() == 4 for f in fired)
    assert any(f.day == 13 and f.weekday() != 4 for f in fired)
    assert sum(f.weekday() == 4 for f in fired) >= 4


# -- time zones and DST ---------------------------------------------------------------------------


def _local_days(fired: list[datetime], tz: ZoneInfo) -> list[str]:
    return [f.astimezone(tz).strftime("%m-%d %H:%M %Z") for f in fired]


def test_daily_0230_across_spring_forward_fires_once_a_day() -> None:
    # 2026-03-29 in Berlin: 02:00 CET jumps to 03:00 CEST, so 02:30 does not exist that day.
    start = datetime(2026, 3, 27, tzinfo=UTC)
    fired = runs(cron("30 2 * * *", "Europe/Berlin"), start, start + timedelta(days=4))
    assert _local_days(fired, BERLIN) == [
        "03-27 02:30 CET",
        "03-28 02:30 CET",
        "03-29 03:30 CEST",  # once, right after the gap, like cron
        "03-30 02:30 CEST",
    ]


def test_daily_0130_across_fall_back_fires_once_a_day() -> None:
    # 2026-11-01 in New York: 01:00-02:00 happens twice (EDT, then EST).
    start = datetime(2026, 10, 30, 12, tzinfo=UTC)
    fired = runs(cron("30 1 * * *", "America/New_York"), start, start + timedelta(days=4))
    assert _local_days(fired, NEW_YORK) == [
        "10-31 01:30 EDT",
        "11-01 01:30 EDT",  # not again at 01:30 EST an hour later
        "11-02 01:30 EST",
        "11-03 01:30 EST",
    ]


def test_daily_0230_across_berlin_fall_back_fires_once() -> None:
    start = datetime(2026, 10, 24, 12, tzinfo=UTC)
    fired = runs(cron("30 2 * * *", "Europe/Berlin"), start, start + timedelta(days=2))
    assert _local_days(fired, BERLIN) == ["10-25 02:30 CEST", "10-26 02:30 CET"]


def test_hourly_cron_keeps_both_passes_of_the_repeated_hour() -> None:
    # A job whose hour is "*" runs every real hour, the repeated one included.
    start = datetime(2026, 11, 1, 4, 0, tzinfo=UTC)  # 00:00 EDT
    fired = runs(cron("0 * * * *", "America/New_York"), start, start + timedelta(hours=4))
    assert [f - start for f in fired] == [timedelta(hours=h) for h in (1, 2, 3)]


def test_intervals_keep_real_time_across_dst() -> None:
    schedule = when("every 1h", "Europe/Berlin", now=datetime(2026, 3, 29, 0, 0, tzinfo=UTC))
    assert schedule.start is not None
    fired = runs(schedule, schedule.start - timedelta(1), schedule.start + timedelta(hours=4))
    gaps = {b - a for a, b in itertools.pairwise(fired)}
    assert gaps == {timedelta(hours=1)}


def test_one_shot_in_the_spring_forward_gap_runs_after_it() -> None:
    schedule = when("2026-03-29 02:30", "Europe/Berlin", now=datetime(2026, 3, 1, tzinfo=UTC))
    assert schedule.at is not None
    assert local_time(schedule.at, BERLIN) == "Sun 2026-03-29 03:30 CEST"


# -- invalid input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("61 * * * *", "minute field '61'"),
        ("0 25 * * *", "hour field '25'"),
        ("0 9 * * 8", "day-of-week field '8'"),
        ("0 9 * 13 *", "month field '13'"),
        ("0 9 * * 1 2026", "has 6"),
        ("cron 0 9 * *", "has 4"),
        ("0 9 * * 1/0", "step after '/'"),
        ("2026-12-01", "no time of day"),
        ("2026-02-30 09:00", "not a valid date"),
        ("tomorrow", "say at what time"),
        ("every day", "say at what time"),
        ("25:00", "not a time of day"),
        ("13pm", "hour is 1-12"),
        ("0m", "longer than zero"),
        ("whenever", "I do not understand"),
        ("", "say when"),
    ],
)
def test_invalid_when_gets_an_actionable_error(text: str, message: str) -> None:
    with pytest.raises(WhenError, match=message):
        when(text)


@pytest.mark.parametrize("zone", ["Europe/Berln", "Mars/Olympus", "CEST"])
def test_unknown_timezones_are_refused(zone: str) -> None:
    with pytest.raises(WhenError, match="unknown timezone") as err:
        when("tomorrow 9:00", zone)
    assert "IANA" in str(err.value)


def test_unknown_timezone_suggests_the_close_one() -> None:
    with pytest.raises(WhenError, match="did you mean Europe/Berlin"):
        when("10m", "Europe/Berln")


@pytest.mark.parametrize(
    "text", ["2020-01-01 09:00", "2026-05-01T09:59:59Z", "today 9:00", "2026-05-01 11:00+02:00"]
)
def test_times_in_the_past_are_refused(text: str) -> None:
    with pytest.raises(WhenError, match="is in the past"):
        check_schedule(when(text), now=NOW, min_interval=60)


def test_intervals_below_the_minimum_are_refused() -> None:
    with pytest.raises(WhenError, match="too often; the shortest interval allowed is 1 min"):
        check_schedule(when("every 30s"), now=NOW, min_interval=60)
    with pytest.raises(WhenError, match="runs every 1 min at times"):
        check_schedule(when("* * * * *"), now=NOW, min_interval=300)
    assert check_schedule(when("every 5m"), now=NOW, min_interval=300) == NOW + timedelta(minutes=5)


def test_a_cron_line_that_never_matches_is_refused() -> None:
    with pytest.raises(WhenError, match="never matches"):
        check_schedule(when("0 0 30 2 *"), now=NOW, min_interval=60)


def test_first_run_of_valid_schedules() -> None:
    assert check_schedule(when("10m"), now=NOW, min_interval=60) == NOW + timedelta(minutes=10)
    first = check_schedule(when("every weekday 8:30", "Europe/Berlin"), now=NOW, min_interval=60)
    assert local_time(first, BERLIN) == "Mon 2026-05-04 08:30 CEST"


def test_settings_refuse_an_unknown_default_timezone(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(None, data_dir=tmp_path, scheduler={"default_timezone": "Mars/Base"})
    (problem,) = err.value.problems
    assert problem.startswith("scheduler.default_timezone: ") and "IANA" in problem
    settings = load_settings(None, data_dir=tmp_path, scheduler={"default_timezone": "Asia/Tokyo"})
    assert settings.scheduler.default_timezone == "Asia/Tokyo"
    assert settings.scheduler.misfire_grace_seconds == 300
