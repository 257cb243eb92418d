"""The "when" language of /remind and the cron tools: `10m`, `in 2 hours`, `tomorrow 9:00`,
`2026-12-01 09:00`, `every 2h`, `every weekday 8:30`, a 5-field cron line, each with an optional
IANA zone name at the end.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from gateway.scheduling.times import (
    MACROS,
    Schedule,
    WhenError,
    crontab_triggers,
    day_number,
    zone,
)

EXAMPLES = (
    "'10m', 'in 2 hours', 'tomorrow 9:00', '2026-12-01 09:00', 'every 2h', "
    "'every weekday 8:30', 'every mon,thu 18:00' or a cron expression like '30 8 * * 1-5'"
)


# -- the "when" language ---------------------------------------------------------------------

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "wk", "wks", "week", "weeks"), 604800),
}
# The longest delay or interval: far beyond any real reminder, well inside what datetime can
# hold (year 9999), so "99999999999999999999d" is refused in words instead of overflowing.
MAX_DURATION_YEARS = 100
_MAX_SECONDS = MAX_DURATION_YEARS * 365.25 * 86400
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?|an?(?=\s))\s*([a-z]+)\s*(?:,|\band\b)?")
_TIME = re.compile(
    r"^(?:(?P<at>at)\s+)?(?:(?P<word>noon|midnight)|(?P<h>\d{1,2})(?::(?P<m>\d{2}))?"
    r"(?::(?P<s>\d{2}))?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)?)$"
)
_ISO = re.compile(r"^(?P<date>\d{4}-\d{1,2}-\d{1,2})(?:(?:t|\s+)(?P<rest>.+))?$")
_OFFSET_TIME = re.compile(r"^\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?\s*(?:z|[+-]\d{2}:?\d{2})$")
_CRONISH = re.compile(r"^[\d*/,\-]+$")
_ZONE_TOKEN = re.compile(r"^(?:[A-Za-z][\w+\-]*(?:/[\w+\-]+)+|UTC|utc|GMT|gmt)$")


def parse_when(text: str, *, now: datetime, timezone: str = "UTC") -> Schedule:
    """Read a "when" (a trailing IANA zone name overrides `timezone`); raises WhenError."""
    tokens = text.split()
    if not tokens:
        raise WhenError(f"say when, for example {EXAMPLES}", rank=0)
    if len(tokens) > 1 and _ZONE_TOKEN.match(tokens[-1]):
        timezone = tokens.pop()
    tz = zone(timezone)
    said = " ".join(tokens).lower()
    for reader in (_cron, _every, _days_at, _iso, _day_word, _weekday_at, _delay, _time_only):
        try:
            schedule = reader(said, now, tz)
        except OverflowError:  # a date at the edge of the calendar, moved by its zone
            raise WhenError(f"'{_cut(said)}' is outside the calendar; give a nearer time") from None
        if schedule is not None:
            return schedule
    raise WhenError(f"I do not understand the time '{' '.join(tokens)}'; try {EXAMPLES}", rank=0)


def split_when(text: str, *, now: datetime, timezone: str = "UTC") -> tuple[Schedule, str, str]:
    """Split `/remind` arguments into (schedule, the "when" words, the rest), taking the longest
    leading "when" that reads.

    Raises the most specific WhenError when no leading part reads as a time.
    """
    tokens = text.split()
    best: WhenError | None = None
    for size in range(min(len(tokens) - 1, 9), 0, -1):
        try:
            schedule = parse_when(" ".join(tokens[:size]), now=now, timezone=timezone)
        except WhenError as exc:
            if best is None or exc.rank > best.rank:
                best = exc
            continue
        rest = tokens[size:]
        if "/" in rest[0] and _ZONE_TOKEN.match(rest[0]):
            zone(rest[0])  # a misspelt zone after the time must not end up in the text
        return schedule, " ".join(tokens[:size]), " ".join(rest)
    raise best or WhenError("say when and what, for example '/remind 10m stretch'", rank=0)


def parse_duration(text: str) -> float | None:
    """Seconds in '10m', '1h30m', 'an hour', '2 days and 3 hours'; None if it is not one.

    Raises WhenError for a duration longer than MAX_DURATION_YEARS."""
    total, pos, parts = 0.0, 0, 0
    text = text.strip()
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None or match.group(2) not in _UNITS:
            return None
        amount = 1.0 if match.group(1).startswith("a") else float(match.group(1))
        total += amount * _UNITS[match.group(2)]
        pos, parts = match.end(), parts + 1
    if total > _MAX_SECONDS:  # inf too, from a number too long for a float
        raise WhenError(f"'{_cut(text)}' is too long; at most {MAX_DURATION_YEARS} years")
    return total if parts else None


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def parse_time(text: str) -> time | None:
    """A time of day ('9:30', '9am', 'at 9', '21:00:15', 'noon'); None if it is not one."""
    match = _TIME.match(text.strip())
    if match is None:
        return None
    if match.group("word"):
        return time(12) if match.group("word") == "noon" else time(0)
    if not (match.group("m") or match.group("ampm") or match.group("at")):
        return None  # a bare number is not a time ("9 pushups")
    hour, minute = int(match.group("h")), int(match.group("m") or 0)
    second = int(match.group("s") or 0)
    ampm = (match.group("ampm") or "").replace(".", "")
    if ampm:
        if not 1 <= hour <= 12:
            raise WhenError(f"'{text.strip()}' is not a time: with am/pm the hour is 1-12")
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise WhenError(f"'{text.strip()}' is not a time of day (00:00 to 23:59)")
    return time(hour, minute, second)


def _at_local(day: date, at: time, tz: ZoneInfo) -> datetime:
    # A wall time in the spring-forward gap resolves to the same offset as before the gap,
    # i.e. an hour later on the new clock, the way cron runs such jobs after the change.
    return datetime.combine(day, at, tzinfo=tz).astimezone(UTC)


def _once(at: datetime, tz: ZoneInfo) -> Schedule:
    return Schedule(kind="once", at=at.astimezone(UTC), timezone=tz.key)


def _cron(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    explicit = said.startswith("cron ")
    expr = MACROS.get(said.removeprefix("cron ").strip(), said.removeprefix("cron ").strip())
    fields = expr.split()
    looks = explicit or said in MACROS
    looks = looks or (3 <= len(fields) <= 7 and all(_CRONISH.match(f) for f in fields[:2]))
    if not looks:
        return None
    crontab_triggers(" ".join(fields), tz)
    return Schedule(kind="cron", cron=" ".join(fields), timezone=tz.key)


def _every(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    if said == "hourly":
        rest = "1h"
    elif said.startswith("every "):
        rest = said.removeprefix("every ").strip()
        if rest in ("day", "weekday", "weekend") or day_number(rest) is not None:
            raise WhenError(f"say at what time, for example 'every {rest} 9:00'", rank=1)
        rest = f"1 {rest}" if rest in _UNITS else rest  # "every hour"
    else:
        return None
    seconds = parse_duration(rest)
    if seconds is None:
        return None
    if seconds <= 0:
        raise WhenError("the interval must be longer than zero")
    start = now + timedelta(seconds=seconds)
    return Schedule(kind="interval", every_seconds=seconds, start=start, timezone=tz.key)


def _days_at(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    """'every weekday 8:30', 'daily at 9', 'every mon, thu 18:00', 'weekends 10am'."""
    every = said.startswith("every ")
    words = said.removeprefix("every ").split()
    for size in (1, 2, 3):  # the time of day is the last 1-3 words
        if len(words) <= size:
            break
        at = parse_time(" ".join(words[-size:]))
        if at is None:
            continue
        days = _day_set(" ".join(words[:-size]), every)
        if days is None:
            continue
        cron = f"{at.minute} {at.hour} * * {days}"
        if at.second:
            raise WhenError("recurring times have minutes, not seconds (say '8:30', not '8:30:15')")
        crontab_triggers(cron, tz)
        return Schedule(kind="cron", cron=cron, timezone=tz.key)
    return None


def _day_set(text: str, every: bool) -> str | None:
    """Crontab weekday field for 'day', 'weekdays', 'mon,wed and fri' (plural or after every)."""
    if text in ("day", "daily") and (every or text == "daily"):
        return "*"
    if text in ("weekday", "weekdays") and (every or text == "weekdays"):
        return "1-5"
    if text in ("weekend", "weekends") and (every or text == "weekends"):
        return "0,6"
    words = [w for w in re.split(r"[\s,]+", text) if w and w != "and"]
    numbers = [day_number(w) for w in words]
    if not words or any(n is None for n in numbers):
        return None
    if not every and not all(w.endswith("days") for w in words):
        return None  # "monday 9:00" is the next Monday, "mondays 9:00" every Monday
    return ",".join(str(n) for n in sorted({n for n in numbers if n is not None}))


def _iso(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    match = _ISO.match(said)
    if match is None:
        return None
    try:
        day = date.fromisoformat("-".join(p.zfill(2) for p in match.group("date").split("-")))
    except ValueError:
        raise WhenError(f"'{match.group('date')}' is not a valid date (YYYY-MM-DD)") from None
    rest = (match.group("rest") or "").strip()
    if not rest:
        raise WhenError(
            f"'{match.group('date')}' has no time of day; add one, e.g. '{day} 09:00'", rank=1
        )
    if _OFFSET_TIME.match(rest):
        clock = rest.replace(" ", "").replace("z", "+00:00")
        try:
            return _once(datetime.fromisoformat(f"{day}T{clock}"), tz)
        except ValueError:
            raise WhenError(f"'{rest}' is not a time with an offset, like 09:00+01:00") from None
    at = parse_time(rest)
    if at is None:
        return None
    return _once(_at_local(day, at, tz), tz)


def _day_word(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    word, _, rest = said.partition(" ")
    if word not in ("today", "tomorrow", "tonight"):
        return None
    if not rest:
        raise WhenError(f"say at what time, for example '{word} 9:00'", rank=1)
    at = parse_time(rest)
    if at is None:
        return None
    day = now.astimezone(tz).date() + timedelta(days=1 if word == "tomorrow" else 0)
    return _once(_at_local(day, at, tz), tz)


def _weekday_at(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    """'monday 9:00', 'next fri at 5pm', 'on tue 10:00': the next such day."""
    words = said.split()
    if words and words[0] in ("next", "on"):
        words = words[1:]
    if len(words) < 2 or words[0].endswith("days"):  # plural: recurring, see _days_at
        return None
    target = day_number(words[0])
    at = parse_time(" ".join(words[1:])) if target is not None else None
    if target is None or at is None:
        return None
    today = now.astimezone(tz).date()
    ahead = (target - today.isoweekday() % 7) % 7
    moment = _at_local(today + timedelta(days=ahead), at, tz)
    if moment <= now:
        moment = _at_local(today + timedelta(days=ahead + 7), at, tz)
    return _once(moment, tz)


def _delay(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    seconds = parse_duration(said.removeprefix("in "))
    if seconds is None:
        return None
    if seconds <= 0:
        raise WhenError("the delay must be longer than zero")
    return _once(now + timedelta(seconds=seconds), tz)


def _time_only(said: str, now: datetime, tz: ZoneInfo) -> Schedule | None:
    at = parse_time(said)
    if at is None:
        return None
    today = now.astimezone(tz).date()
    moment = _at_local(today, at, tz)
    if moment <= now:  # "at 9:00" said after nine means tomorrow
        moment = _at_local(today + timedelta(days=1), at, tz)
    return _once(moment, tz)
