"""Builds the profile, provider and budget parts from Settings for the composition root."""

from __future__ import annotations

from collections.abc import Callable

from gateway.budgets.ledger import UsageLedger
from gateway.budgets.limits import BudgetGate
from gateway.budgets.periods import Periods
from gateway.config import Settings
from gateway.llm.breaker import CircuitBreakers
from gateway.llm.providers import ProviderPool
from gateway.profiles.book import ProfileBook
from gateway.profiles.choices import ModelChoices
from gateway.profiles.plan import Say, TurnPlanner
from gateway.runtime.metrics import Metrics
from gateway.runtime.telemetry import Telemetry
from gateway.sdk.messages import UserRef
from gateway.store.base import Store


def build_planner(
    settings: Settings,
    *,
    store: Store,
    pool: ProviderPool,
    telemetry: Telemetry,
    say: Say,
    is_admin: Callable[[UserRef], bool],
) -> TurnPlanner:
    llm = settings.llm
    breakers = CircuitBreakers(
        failures=llm.breaker_failures,
        cooldown=llm.breaker_cooldown_seconds,
        max_cooldown=llm.breaker_max_cooldown_seconds,
    )
    ledger = UsageLedger(
        store, Periods(settings.budgets.timezone), keep_days=settings.budgets.keep_days
    )
    planner = TurnPlanner(
        settings,
        book=ProfileBook(settings),
        choices=ModelChoices(store),
        pool=pool,
        breakers=breakers,
        ledger=ledger,
        gate=BudgetGate(settings.budgets, ledger, store, is_admin=is_admin),
        telemetry=telemetry,
        say=say,
    )
    telemetry.metrics.add_collector(_breaker_gauges(breakers))
    return planner


def _breaker_gauges(breakers: CircuitBreakers) -> Callable[[Metrics], None]:
    shown: set[str] = set()

    def collect(metrics: Metrics) -> None:
        held = set(breakers.open_keys())
        for key in shown | held:
            metrics.gauge("llm_breaker_open", 1.0 if key in held else 0.0, target=key)
        shown.update(held)

    return collect
