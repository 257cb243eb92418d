"""Budget periods, the usage ledger on both stores, and the limits: refusal at 100%, one
warning per period at 80%, admins exempt unless it is a scheduled job."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime

import pytest

from gateway.budgets.ledger import Exact, TurnUsage, UsageLedger
from gateway.budgets.limits import BudgetGate, Who
from gateway.budgets.periods import PeriodKind, Periods
from gateway.config import load_settings
from gateway.llm.types import Usage
from gateway.sdk.messages import ChatKind, ChatRef, UserRef
from gateway.store.base import Store, StoreUnavailable
from gateway.store.redis import RedisStore
from tests.fixtures_redis import RedisServer
from tests.reply_losing_proxy import reply_losing_proxy

ANA = UserRef(platform="slack", user_id="U1")
BOSS = UserRef(platform="slack", user_id="ADMIN")
CHAT = ChatRef(platform="slack", chat_id="C1", kind=ChatKind.GROUP)
NOON = datetime(2025, 3, 31, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["embedded", "redis"])
def store(request: pytest.FixtureRequest) -> Store:
    name = "embedded_store" if request.param == "embedded" else "redis_store"
    found: Store = request.getfixturevalue(name)
    return found


def test_periods_follow_the_timezone_and_roll_over_months() -> None:
    berlin = Periods("Europe/Berlin")
    late = datetime(2025, 3, 31, 22, 30, tzinfo=UTC)  # already April 1st in Berlin
    assert berlin.current("day", late).id == "d2025-04-01"
    assert berlin.current("month", late).id == "m2025-04"
    utc = Periods()
    december = utc.current("month", datetime(2025, 12, 31, 23, 0, tzinfo=UTC))
    assert (december.id, december.ends) == ("m2025-12", datetime(2026, 1, 1, tzinfo=utc.zone))
    assert [p.id for p in utc.days(date(2025, 2, 27), date(2025, 3, 1))] == [
        "d2025-02-27",
        "d2025-02-28",
        "d2025-03-01",
    ]
    assert (
        utc.describe_reset(utc.current("day", NOON), NOON) == "2025-04-01 00:00 UTC (in 12 h 0 min)"
    )


def turn(
    user: UserRef = ANA, job: str | None = None, prompt: int = 100, out: int = 20
) -> TurnUsage:
    return TurnUsage(
        user=user.address,
        chat="slack:C1",
        profile="coding",
        job=job,
        by_model={"or/big": Usage(prompt, out), "local/small": Usage(10, 5)},
        cost_by_model={"or/big": 0.0123, "local/small": 0.0},
    )


KINDS: tuple[PeriodKind, ...] = ("day", "month")
EVERY: Exact = frozenset(
    (kind, dimension)
    for kind in KINDS
    for dimension in ("user", "chat", "job", "profile", "model", "all")
)


async def test_ledger_totals_per_dimension_and_period(store: Store) -> None:
    ledger = UsageLedger(store, Periods())
    first = await ledger.record(turn(), NOON, exact=EVERY)
    assert first[("d2025-03-31", "user", "slack:U1")].tokens == 135
    second = await ledger.record(turn(job="j1"), NOON, exact=EVERY)
    day = second[("d2025-03-31", "chat", "slack:C1")]
    assert (day.tokens_in, day.tokens_out, day.micro_usd) == (220, 50, 24600)
    assert second[("m2025-03", "job", "j1")].tokens == 135
    assert second[("m2025-03", "model", "or/big")].micro_usd == 24600
    by_model = await ledger.table([ledger.periods.day(date(2025, 3, 31))], "model")
    assert by_model["or/big"].tokens == 240 and by_model["local/small"].tokens == 30
    assert set(await ledger.table([ledger.periods.day(date(2025, 3, 31))], "profile")) == {"coding"}
    assert await ledger.table([ledger.periods.day(date(2025, 3, 30))], "user") == {}
    await ledger.close()


async def test_counters_no_limit_reads_are_written_in_batches(store: Store) -> None:
    ledger = UsageLedger(store, Periods(), flush_seconds=3600)
    exact: Exact = frozenset({("day", "user")})
    for _ in range(3):
        totals = await ledger.record(turn(), NOON, exact=exact)
    assert set(totals) == {("d2025-03-31", "user", "slack:U1")}
    assert totals[("d2025-03-31", "user", "slack:U1")].tokens == 3 * 135
    assert (await ledger.spend("d2025-03-31", "chat", "slack:C1")).tokens == 0  # in memory
    assert (await ledger.spend("m2025-03", "user", "slack:U1")).tokens == 0
    await ledger.close()  # a shutdown writes what waits
    assert (await ledger.spend("d2025-03-31", "chat", "slack:C1")).tokens == 3 * 135
    assert (await ledger.spend("m2025-03", "user", "slack:U1")).tokens == 3 * 135
    assert (await ledger.spend("d2025-03-31", "user", "slack:U1")).tokens == 3 * 135  # once
    month = await ledger.table([ledger.periods.current("month", NOON)], "model")
    days = await ledger.table([ledger.periods.day(date(2025, 3, 31))], "model")
    assert days == month and days["or/big"].tokens == 3 * 120


async def test_a_failed_flush_keeps_the_usage_for_the_next(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url, key_prefix="flush")
    try:
        ledger = UsageLedger(store, Periods(), flush_seconds=3600)
        await ledger.record(turn(), NOON)
        redis_server.stop()
        with pytest.raises(StoreUnavailable):
            await ledger.flush()
        redis_server.start()
        await ledger.flush()
        assert (await ledger.spend("d2025-03-31", "user", "slack:U1")).tokens == 135
        await ledger.close()
    finally:
        await store.close()


async def test_a_flush_sent_again_after_its_reply_was_lost_counts_once(redis_url: str) -> None:
    """The flush was written and its reply lost: the ledger cannot tell that from a flush
    that never arrived, so it sends the same one again, and its increments count once."""
    async with reply_losing_proxy(redis_url) as proxy:
        store = RedisStore(proxy.url, key_prefix=f"lost-{uuid.uuid4().hex[:8]}", retries=0)
        try:
            ledger = UsageLedger(store, Periods(), flush_seconds=3600)
            await store.incr("warm")  # connected, its scripts loaded: the next reply is the flush's
            await ledger.record(turn(), NOON)
            proxy.losing = 1
            with pytest.raises(StoreUnavailable):
                await ledger.flush()
            assert proxy.lost == 1 and ledger.waiting
            await ledger.record(turn(), NOON)  # a turn after the failure: written with it
            await ledger.flush()
            assert not ledger.waiting
            assert (await ledger.spend("d2025-03-31", "user", "slack:U1")).tokens == 2 * 135
            assert (await ledger.spend("m2025-03", "model", "or/big")).tokens == 2 * 120
            await ledger.close()
        finally:
            await store.close()


async def test_gate_refuses_at_the_limit_and_warns_once(store: Store) -> None:
    settings = load_settings(
        None, budgets={"per_user_daily_tokens": 300, "per_chat_daily_usd": 1.0}
    )
    ledger = UsageLedger(store, Periods())
    gate = BudgetGate(settings.budgets, ledger, store, is_admin=lambda u: u == BOSS)
    who = Who(ANA, CHAT)
    assert await gate.check(who, NOON) is None
    exact = gate.exact(who)
    totals = await ledger.record(turn(prompt=100, out=20), NOON, exact=exact)  # 135 of 300
    assert await gate.notices(who, totals, NOON) == []
    totals = await ledger.record(turn(prompt=100, out=20), NOON, exact=exact)  # 270: 90%
    (warning,) = await gate.notices(who, totals, NOON)
    assert warning.startswith("You have used 90% of your daily budget (270 of 300 tokens)")
    assert await gate.notices(who, totals, NOON) == []  # once per period
    assert await gate.check(who, NOON) is None
    totals = await ledger.record(turn(prompt=100, out=20), NOON, exact=exact)  # 405: over
    (limit,) = await gate.notices(who, totals, NOON)
    assert "used your daily budget (405 of 300 tokens)" in limit
    refusal = await gate.check(who, NOON)
    assert refusal is not None and refusal.dimension == "user"
    assert refusal.message == (
        "You have used your daily budget (405 of 300 tokens); new requests wait until it "
        "resets at 2025-04-01 00:00 UTC (in 12 h 0 min)."
    )
    # An admin's own message is not limited; the same admin's scheduled job is.
    assert await gate.check(Who(BOSS, CHAT), NOON) is None
    assert gate.applicable(Who(BOSS, CHAT, job="j9"))
    # The next day starts from zero.
    assert await gate.check(who, datetime(2025, 4, 1, 0, 1, tzinfo=UTC)) is None
    await ledger.close()


async def test_money_limits_per_chat_and_job(store: Store) -> None:
    settings = load_settings(None, budgets={"per_job_daily_usd": 0.02, "admins_exempt": False})
    ledger = UsageLedger(store, Periods())
    gate = BudgetGate(settings.budgets, ledger, store, is_admin=lambda u: True)
    job = Who(BOSS, CHAT, job="j1")
    await ledger.record(turn(BOSS, job="j1"), NOON, exact=gate.exact(job))  # $0.0123 of $0.02
    assert await gate.check(job, NOON) is None
    totals = await ledger.record(turn(BOSS, job="j1"), NOON, exact=gate.exact(job))  # $0.0246
    (line,) = await gate.notices(job, totals, NOON)
    assert line.startswith("This scheduled job has used its daily budget ($0.0246 of $0.02)")
    refusal = await gate.check(job, NOON)
    assert refusal is not None and refusal.dimension == "job"
    assert await gate.check(Who(BOSS, CHAT, job="j2"), NOON) is None  # another job is fine
    await ledger.close()


def test_the_current_period_follows_the_clock_both_ways() -> None:
    periods = Periods("Europe/Berlin")  # midnight there is 23:00 UTC in winter
    before = datetime(2026, 1, 31, 22, 59, tzinfo=UTC)
    after = datetime(2026, 1, 31, 23, 1, tzinfo=UTC)
    assert periods.current("day", before).id == "d2026-01-31"
    assert periods.current("month", before).id == "m2026-01"
    assert periods.current("day", after).id == "d2026-02-01"  # a new day, and a new month
    assert periods.current("month", after).id == "m2026-02"
    assert periods.current("day", before).id == "d2026-01-31"  # an earlier moment again
    assert periods.current("day", after) is periods.current("day", after)  # kept while current


def test_usage_command_offers_every_ledger_dimension() -> None:
    # `chatgate usage --by` names the ledger's dimensions without importing the ledger.
    from gateway.budgets.cli import BY
    from gateway.budgets.ledger import DIMENSIONS

    assert tuple(d for d in DIMENSIONS if d != "all") == BY
