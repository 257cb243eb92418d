"""The usage ledger: what each turn used, added to counters per period and dimension, with an
index per period so operators can list who spent what.

Cost is kept in micro-dollars, so the counters stay integers (`Store.incr`).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from gateway.budgets.periods import Period, PeriodKind, Periods
from gateway.llm.types import Usage
from gateway.runtime.tasks import stop_task
from gateway.store import keys
from gateway.store.base import Batch, Store, StoreUnavailable

log = logging.getLogger(__name__)

DIMENSIONS = ("user", "chat", "job", "profile", "model", "all")
UNITS = ("in", "out", "usd")
ALL = "*"  # the id of the "all" dimension
_DAY = 24 * 3600.0


@dataclass(frozen=True)
class Spend:
    tokens_in: int = 0
    tokens_out: int = 0
    micro_usd: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @property
    def usd(self) -> float:
        return self.micro_usd / 1_000_000

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.micro_usd + other.micro_usd,
        )


@dataclass(frozen=True)
class TurnUsage:
    """What one turn used, and for whom."""

    user: str  # platform:user_id
    chat: str  # platform:chat_id
    profile: str
    job: str | None = None  # the scheduled job that ran the turn
    by_model: Mapping[str, Usage] = field(default_factory=dict)  # "provider/model" -> usage
    cost_by_model: Mapping[str, float] = field(default_factory=dict)  # USD

    @property
    def spend(self) -> Spend:
        total = Spend()
        for model, usage in self.by_model.items():
            total += _spend(usage, self.cost_by_model.get(model, 0.0))
        return total

    def dimensions(self) -> list[tuple[str, str, Spend]]:
        """(dimension, id, spend) for every counter this turn adds to."""
        spend = self.spend
        rows = [("user", self.user, spend), ("chat", self.chat, spend)]
        if self.job:
            rows.append(("job", self.job, spend))
        rows += [("profile", self.profile, spend), ("all", ALL, spend)]
        for model, usage in self.by_model.items():
            rows.append(("model", model, _spend(usage, self.cost_by_model.get(model, 0.0))))
        return rows


def _spend(usage: Usage, usd: float) -> Spend:
    return Spend(usage.prompt_tokens, usage.completion_tokens, round(usd * 1_000_000))


Totals = dict[tuple[str, str, str], Spend]  # (period id, dimension, id) -> totals after a turn
Where = tuple[str, str, str]  # (period id, dimension, id)
Exact = frozenset[tuple[PeriodKind, str]]  # (period kind, dimension) written at once


class UsageLedger:
    """Adds what turns used to the store's counters.

    Counters a budget limit reads are written at the end of each turn, in one round trip, so
    every replica sees them at once. The rest (reports: profiles, models, unlimited people
    and chats) is added up in memory and written every `flush_seconds` and at `close()`, so
    a busy gateway writes each counter about once a second instead of once a turn.
    """

    def __init__(
        self, store: Store, periods: Periods, *, keep_days: int = 400, flush_seconds: float = 1.0
    ) -> None:
        self._store = store
        self.periods = periods
        self._day_ttl = keep_days * _DAY
        self._month_ttl = max(keep_days, 62) * _DAY
        self._flush_seconds = flush_seconds
        self._indexed: set[str] = set()  # period indexes given their expiry by this process
        self._pending: dict[Where, Spend] = {}
        # A flush that failed, with its increments' id: sent again as it was, so one written
        # before its reply was lost is not added twice. What comes meanwhile waits in _pending.
        self._unconfirmed: tuple[str, dict[Where, Spend]] | None = None
        self._ttls: dict[str, float] = {}  # period id -> its counters' TTL
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    async def record(
        self, turn: TurnUsage, now: datetime | None = None, *, exact: Exact = frozenset()
    ) -> Totals:
        """Add a turn's usage. Counters of the (period kind, dimension) pairs in `exact` are
        written now and their new totals returned; the rest waits for the next flush."""
        rows = turn.dimensions()
        if not rows or not turn.by_model:
            return {}
        periods = [self.periods.current("day", now), self.periods.current("month", now)]
        written: dict[Where, Spend] = {}
        for period in periods:
            self._ttls[period.id] = self._ttl(period)
            for dimension, ident, spend in rows:
                where = (period.id, dimension, ident)
                if (period.kind, dimension) in exact:
                    written[where] = written.get(where, Spend()) + spend
                else:
                    self._pending[where] = self._pending.get(where, Spend()) + spend
        totals: Totals = {}
        if written:
            results = await self._store.run(self._batch(written, once=_flush_id()))
            step = len(UNITS)
            for n, where in enumerate(written):
                tin, tout, usd = results[n * step : n * step + step]
                totals[where] = Spend(int(tin), int(tout), int(usd))
            await self._index_expiry([p.id for p in periods])
        idle = self._flusher is None or self._flusher.done()
        if self._pending and idle and not self._closed:
            self._flusher = asyncio.create_task(self._flush_soon(), name="usage ledger flush")
        return totals

    async def flush(self) -> None:
        """Write what waits in memory, in one round trip; on failure it is kept, with its
        increments' id, and sent again as it was at the next flush."""
        while self.waiting:  # the flush that failed, then what came since
            if self._unconfirmed is None:
                self._unconfirmed, self._pending = (_flush_id(), self._pending), {}
            once, spends = self._unconfirmed
            await self._store.run(self._batch(spends, once=once))
            self._unconfirmed = None
            await self._index_expiry(sorted({period_id for period_id, _, _ in spends}))

    @property
    def waiting(self) -> bool:
        """Usage not yet written: added since the last flush, or in a flush that failed."""
        return bool(self._pending) or self._unconfirmed is not None

    async def close(self) -> None:
        """Stop the timer and write what waits (at shutdown)."""
        self._closed = True
        await stop_task(self._flusher)
        self._flusher = None
        try:
            await self.flush()
        except StoreUnavailable as exc:
            failed = self._unconfirmed[1] if self._unconfirmed else {}
            lost = sum(spend.tokens for spend in [*self._pending.values(), *failed.values()])
            log.error("usage not recorded at shutdown tokens=%d error=%s", lost, exc)

    async def _flush_soon(self) -> None:
        await asyncio.sleep(self._flush_seconds)
        try:
            await self.flush()
        except StoreUnavailable as exc:
            log.warning("usage flush failed; retried later error=%s", exc)
        self._flusher = None
        if self.waiting and not self._closed:
            self._flusher = asyncio.create_task(self._flush_soon(), name="usage ledger flush")

    def _batch(self, spends: Mapping[Where, Spend], *, once: str) -> Batch:
        """Every counter first (their results come first, `len(UNITS)` per entry, in order),
        then the index fields, period by period: the Redis store sends each run as one
        command."""
        batch = Batch()
        for (period_id, dimension, ident), spend in spends.items():
            ttl = self._ttls.get(period_id, self._month_ttl)
            for unit, amount in zip(UNITS, _amounts(spend), strict=True):
                counter = keys.usage(period_id, dimension, ident, unit)
                batch.incr(counter, amount, ttl=ttl, once=once)
        for period_id, dimension, ident in sorted(spends):
            batch.hset(keys.usage_index(period_id), f"{dimension}:{ident}", "1")
        return batch

    async def _index_expiry(self, period_ids: Sequence[str]) -> None:
        for period_id in period_ids:
            index = keys.usage_index(period_id)
            if index not in self._indexed:
                await self._store.expire(index, self._ttls.get(period_id, self._month_ttl))
                self._indexed.add(index)

    async def spends(self, wanted: Sequence[tuple[str, str, str]]) -> list[Spend]:
        """Totals for (period id, dimension, id) triples, in one round trip."""
        if not wanted:
            return []
        batch = Batch()
        for period_id, dimension, ident in wanted:
            for unit in UNITS:
                batch.get(keys.usage(period_id, dimension, ident, unit))
        raw = await self._store.run(batch)
        out = []
        for n in range(len(wanted)):
            tin, tout, usd = (int(v or 0) for v in raw[n * 3 : n * 3 + 3])
            out.append(Spend(tin, tout, usd))
        return out

    async def spend(self, period_id: str, dimension: str, ident: str) -> Spend:
        return (await self.spends([(period_id, dimension, ident)]))[0]

    async def table(self, periods: Sequence[Period], dimension: str) -> dict[str, Spend]:
        """Totals per id of one dimension, summed over the periods (for `chatgate usage`)."""
        out: dict[str, Spend] = {}
        for period in periods:
            index = await self._store.hgetall(keys.usage_index(period.id))
            idents = [f.split(":", 1)[1] for f in index if f.split(":", 1)[0] == dimension]
            spends = await self.spends([(period.id, dimension, i) for i in idents])
            for ident, spend in zip(idents, spends, strict=True):
                out[ident] = out.get(ident, Spend()) + spend
        return out

    def _ttl(self, period: Period) -> float:
        return self._day_ttl if period.kind == "day" else self._month_ttl


def _amounts(spend: Spend) -> tuple[int, int, int]:
    return spend.tokens_in, spend.tokens_out, spend.micro_usd


def _flush_id() -> str:
    """The id of one write's increments: the same write sent again counts once."""
    return uuid.uuid4().hex
