"""Budget limits: before a turn, refuse it when a limit it falls under is used up; after it,
warn once per period when a limit passes `warn_at` (80%) or is reached.

Checks read shared counters, so with several replicas two turns that start together may
both pass and overshoot a limit by one turn each; the next turn is refused everywhere. The
warning is given once across replicas (a set-if-absent key per period).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from gateway.budgets.ledger import ALL, Spend, Totals, UsageLedger
from gateway.budgets.periods import Period, PeriodKind, Periods
from gateway.config.budgets import BudgetSettings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.store import keys
from gateway.store.base import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limit:
    dimension: str  # user | chat | job | all
    period: PeriodKind
    usd: float  # 0: none
    tokens: int  # 0: none
    subject: str  # "You have", "This chat has", ...
    name: str  # "daily budget"


@dataclass(frozen=True)
class Who:
    """Whom a turn's spending counts for."""

    user: UserRef
    chat: ChatRef
    job: str | None = None  # the scheduled job running the turn

    def ident(self, dimension: str) -> str | None:
        if dimension == "user":
            return self.user.address
        if dimension == "chat":
            return f"{self.chat.platform}:{self.chat.chat_id}"
        if dimension == "job":
            return self.job
        return ALL


@dataclass(frozen=True)
class Refusal:
    dimension: str
    message: str


def limits_from(settings: BudgetSettings) -> list[Limit]:
    s = settings
    candidates = [
        Limit("user", "day", s.per_user_daily_usd, s.per_user_daily_tokens, "You have", "daily"),
        Limit(
            "chat", "day", s.per_chat_daily_usd, s.per_chat_daily_tokens, "This chat has", "daily"
        ),
        Limit(
            "job",
            "day",
            s.per_job_daily_usd,
            s.per_job_daily_tokens,
            "This scheduled job has",
            "daily",
        ),
        Limit(
            "all",
            "month",
            s.global_monthly_usd,
            s.global_monthly_tokens,
            "The gateway has",
            "monthly",
        ),
    ]
    return [limit for limit in candidates if limit.usd or limit.tokens]


class BudgetGate:
    def __init__(
        self,
        settings: BudgetSettings,
        ledger: UsageLedger,
        store: Store,
        *,
        is_admin: Callable[[UserRef], bool],
    ) -> None:
        self._settings = settings
        self._ledger = ledger
        self._store = store
        self._periods: Periods = ledger.periods
        self._is_admin = is_admin
        self.limits = limits_from(settings)

    def applicable(self, who: Who) -> list[tuple[Limit, str]]:
        """The limits a turn falls under, with the counter id each one reads."""
        if who.job is None and self._settings.admins_exempt and self._is_admin(who.user):
            return []
        out = []
        for limit in self.limits:
            ident = who.ident(limit.dimension)
            if ident is not None:
                out.append((limit, ident))
        return out

    def exact(self, who: Who) -> frozenset[tuple[PeriodKind, str]]:
        """The counters a turn's limits read, which the ledger must write at once."""
        return frozenset((limit.period, limit.dimension) for limit, _ in self.applicable(who))

    async def check(self, who: Who, now: datetime | None = None) -> Refusal | None:
        """A refusal when a limit this turn falls under is used up; one store round trip."""
        limits = self.applicable(who)
        if not limits:
            return None
        periods = [self._periods.current(limit.period, now) for limit, _ in limits]
        wanted = [
            (p.id, limit.dimension, ident)
            for (limit, ident), p in zip(limits, periods, strict=True)
        ]
        spends = await self._ledger.spends(wanted)
        for (limit, ident), period, spend in zip(limits, periods, spends, strict=True):
            if _share(limit, spend) >= 1.0:
                log.info("budget refused dimension=%s id=%s", limit.dimension, ident)
                return Refusal(
                    limit.dimension,
                    f"{limit.subject} used {_their(limit)} {limit.name} budget "
                    f"({_amount(limit, spend)}); new requests wait until it resets at "
                    f"{self._periods.describe_reset(period, now)}.",
                )
        return None

    async def notices(self, who: Who, totals: Totals, now: datetime | None = None) -> list[str]:
        """Lines to tell the chat after a turn: a limit passed warn_at or was reached. Each is
        given once per period, whichever replica ran the turn."""
        lines = []
        for limit, ident in self.applicable(who):
            period = self._periods.current(limit.period, now)
            spend = totals.get((period.id, limit.dimension, ident))
            if spend is None:
                continue
            share = _share(limit, spend)
            level = "limit" if share >= 1.0 else "warn" if share >= self._settings.warn_at else ""
            if not level:
                continue
            claim = keys.budget_notice(period.id, limit.dimension, ident, level)
            ttl = max(period.seconds_left(now or self._periods.now()), 60.0)
            if not await self._store.set(claim, "1", ttl=ttl, only_if_absent=True):
                continue
            lines.append(self._notice(limit, spend, share, period, level, now))
        return lines

    def _notice(
        self,
        limit: Limit,
        spend: Spend,
        share: float,
        period: Period,
        level: str,
        now: datetime | None,
    ) -> str:
        resets = self._periods.describe_reset(period, now)
        if level == "limit":
            return (
                f"{limit.subject} used {_their(limit)} {limit.name} budget "
                f"({_amount(limit, spend)}); new requests wait until it resets at {resets}."
            )
        return (
            f"{limit.subject} used {int(share * 100)}% of {_their(limit)} {limit.name} budget "
            f"({_amount(limit, spend)}); it resets at {resets}."
        )


def _share(limit: Limit, spend: Spend) -> float:
    shares = []
    if limit.usd:  # in whole micro-dollars, so $0.08 of $0.10 is exactly 80%
        shares.append(spend.micro_usd / round(limit.usd * 1_000_000))
    if limit.tokens:
        shares.append(spend.tokens / limit.tokens)
    return max(shares, default=0.0)


def _their(limit: Limit) -> str:
    return "your" if limit.dimension == "user" else "its"


def _amount(limit: Limit, spend: Spend) -> str:
    parts = []
    if limit.usd:
        parts.append(f"{usd(spend.usd)} of {usd(limit.usd)}")
    if limit.tokens:
        parts.append(f"{spend.tokens:,} of {limit.tokens:,} tokens")
    return ", ".join(parts)


def usd(amount: float) -> str:
    """Dollars with cents, and up to four decimals for small sums: $3.50, $0.0246."""
    whole, _, cents = f"{amount:,.4f}".partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"
