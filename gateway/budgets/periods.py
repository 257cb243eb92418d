"""Budget periods: days and months that begin at midnight in the budget's timezone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

PeriodKind = Literal["day", "month"]


@dataclass(frozen=True)
class Period:
    kind: PeriodKind
    id: str  # "d2025-01-31" or "m2025-01", as in store keys
    starts: datetime
    ends: datetime  # the moment totals reset

    def seconds_left(self, now: datetime) -> float:
        return max((self.ends - now).total_seconds(), 0.0)


class Periods:
    def __init__(self, timezone: str = "UTC") -> None:
        self.zone = ZoneInfo(timezone)
        self.timezone = timezone
        self._latest: dict[PeriodKind, Period] = {}  # asked for every turn: kept while current

    def now(self) -> datetime:
        return datetime.now(UTC)

    def current(self, kind: PeriodKind, now: datetime | None = None) -> Period:
        moment = now or self.now()
        latest = self._latest.get(kind)
        if latest is not None and latest.starts <= moment < latest.ends:
            return latest
        local = moment.astimezone(self.zone)
        period = self.day(local.date()) if kind == "day" else self.month(local.year, local.month)
        self._latest[kind] = period
        return period

    def day(self, day: date) -> Period:
        starts = datetime(day.year, day.month, day.day, tzinfo=self.zone)
        following = day + timedelta(days=1)
        ends = datetime(following.year, following.month, following.day, tzinfo=self.zone)
        return Period("day", f"d{day.isoformat()}", starts, ends)

    def month(self, year: int, month: int) -> Period:
        starts = datetime(year, month, 1, tzinfo=self.zone)
        ends = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=self.zone)
        return Period("month", f"m{year:04d}-{month:02d}", starts, ends)

    def days(self, since: date, until: date) -> list[Period]:
        """Every day from `since` to `until`, both included."""
        count = (until - since).days + 1
        return [self.day(since + timedelta(days=i)) for i in range(max(count, 0))]

    def describe_reset(self, period: Period, now: datetime | None = None) -> str:
        """ "2025-02-01 00:00 UTC (in 3 h 12 min)"."""
        left = period.seconds_left(now or self.now())
        hours, rest = divmod(int(left + 59) // 60, 60)
        span = f"{hours} h {rest} min" if hours else f"{rest} min"
        if hours >= 48:
            span = f"{hours // 24} days"
        return f"{period.ends:%Y-%m-%d %H:%M} {self.timezone} (in {span})"
