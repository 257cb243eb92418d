"""The gateway's metrics, kept by `prometheus_client` and served at /metrics with its process and
garbage-collector metrics.

Every metric is declared once in `FAMILIES` (its type, help text, label names and, for
histograms, its buckets), so the Grafana dashboard in deploy/ can be checked against the
names. The parts record through `Metrics.inc` / `gauge` / `observe` by name; a name used
without a declaration is still exported (as `untyped`, or a histogram with the default
buckets), so a forgotten declaration loses nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric, UnknownMetricFamily
from prometheus_client.registry import Collector as PrometheusCollector
from prometheus_client.samples import Sample

log = logging.getLogger(__name__)

PREFIX = "chatgate_"
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4  # the text format every Prometheus reads
SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_LONG_SECONDS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
_STEPS = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 25.0, 50.0)

# A `_created` series beside every counter and histogram doubles what /metrics carries; the
# dashboard has no use for it (and Prometheus reads a counter's reset from the counter itself).
disable_created_metrics()  # type: ignore[no-untyped-call]

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class Family:
    name: str  # without the chatgate_ prefix; a counter's ends in _total
    kind: Kind
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = SECONDS


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        # intake
        Family("messages_total", "counter", "Messages submitted, by platform.", ("platform",)),
        Family("refused_total", "counter", "Messages refused, by reason.", ("reason",)),
        Family("duplicates_total", "counter", "Platform events dropped as repeats."),
        Family("commands_total", "counter", "Chat commands answered, by command.", ("command",)),
        Family("messages_queued_total", "counter", "Messages that waited behind a turn."),
        Family("queue_pending_messages", "gauge", "Messages stored, not yet answered (all)."),
        Family("queue_oldest_wait_seconds", "gauge", "Age of the oldest waiting message."),
        Family("turns_running", "gauge", "Turns running in this process."),
        Family(
            "queue_wait_seconds",
            "histogram",
            "Time from a message's arrival to the start of its turn.",
            buckets=(0.01, *SECONDS, 300.0),
        ),
        # turns
        Family(
            "turns_total",
            "counter",
            "Turns finished, by status and profile.",
            ("status", "profile"),
        ),
        Family("turns_rerun_total", "counter", "Turns run again after their process stopped."),
        Family("sessions_recovered_total", "counter", "Sessions claimed from a dead process."),
        Family("session_leases_expired_total", "counter", "Session leases lost mid-turn."),
        Family(
            "turns_stale_stopped_total",
            "counter",
            "Runs stopped before an effect because another run took their session over.",
        ),
        Family(
            "replies_lost_in_crash_total",
            "counter",
            "Replies whose slot was claimed by a run that stopped before recording the send.",
        ),
        Family("turns_failed_total", "counter", "Turn attempts that raised (retried or not)."),
        Family("dead_letters_total", "counter", "Messages set aside after failing every attempt."),
        Family("event_loop_lag_seconds", "gauge", "How late the event loop ran its last tick."),
        Family("turn_seconds", "histogram", "Turn duration, by profile.", ("profile",)),
        Family(
            "turn_iterations",
            "histogram",
            "Model calls per turn, by profile.",
            ("profile",),
            _STEPS,
        ),
        Family(
            "tool_calls_total", "counter", "Tool calls, by tool and outcome.", ("tool", "outcome")
        ),
        Family("tool_seconds", "histogram", "Tool call duration, by tool.", ("tool",)),
        Family("deliveries_failed_total", "counter", "Replies a platform did not take."),
        # the model
        Family(
            "llm_request_seconds",
            "histogram",
            "LLM completion latency (retries included), by provider, model and outcome.",
            ("provider", "model", "outcome"),
        ),
        Family(
            "llm_tokens_total",
            "counter",
            "Tokens used, by provider, model and kind.",
            ("provider", "model", "kind"),
        ),
        Family(
            "llm_cost_usd_total",
            "counter",
            "Cost in USD, by provider and model.",
            ("provider", "model"),
        ),
        Family(
            "llm_errors_total",
            "counter",
            "Failed LLM completions, by provider, model, kind.",
            ("provider", "model", "kind"),
        ),
        Family(
            "llm_fallbacks_total",
            "counter",
            "Turns moved to the next model of their chain.",
            ("from_model", "to_model", "reason"),
        ),
        Family(
            "llm_breaker_open", "gauge", "1 while a provider or model is held out.", ("target",)
        ),
        # budgets
        Family("budget_warnings_total", "counter", "Budget warnings given."),
        Family(
            "budget_refusals_total", "counter", "Turns refused by a budget, by scope.", ("scope",)
        ),
        # approvals
        Family("approvals_pending", "gauge", "Approval requests waiting in this process."),
        Family(
            "approvals_decided_total",
            "counter",
            "Approval requests decided, by outcome.",
            ("outcome",),
        ),
        Family(
            "approvals_tampered_total",
            "counter",
            "Sealed store entries (approvals, answers, grants) that failed verification.",
            ("kind",),
        ),
        Family(
            "approval_decision_seconds",
            "histogram",
            "Time from an approval request to its decision.",
            buckets=_LONG_SECONDS,
        ),
        # scheduler and platforms
        Family(
            "scheduler_runs_total",
            "counter",
            "Scheduled job runs, by kind and status.",
            ("kind", "status"),
        ),
        Family(
            "platform_sends_total",
            "counter",
            "Messages sent, by platform and outcome.",
            ("platform", "outcome"),
        ),
        Family(
            "platform_rate_limited_total",
            "counter",
            "429 answers from a platform API, by platform.",
            ("platform",),
        ),
        Family(
            "platform_delivery_statuses_total",
            "counter",
            "Delivery statuses a platform reported for sent messages (WhatsApp), by status.",
            ("platform", "status"),
        ),
        Family("stream_updates_total", "counter", "Drafts and edits of streamed replies."),
    )
}

Collector = Callable[["Metrics"], None]


class _Counting(Protocol):
    def inc(self, amount: float = 1) -> None: ...


class _Setting(Protocol):
    def set(self, value: float) -> None: ...


class _Observing(Protocol):
    def observe(self, amount: float) -> None: ...


class _Dropped:
    """Where a recording goes that does not fit its declaration (logged once): metrics never
    fail a turn."""

    def inc(self, amount: float = 1) -> None:
        return None

    def set(self, value: float) -> None:
        return None

    def observe(self, amount: float) -> None:
        return None


_DROPPED = _Dropped()
_Key = tuple[Any, ...]  # (name, *label items in the caller's order)


class _Untyped(PrometheusCollector):
    """Counters and gauges used without a declaration, exported as `untyped`."""

    def __init__(self) -> None:
        self.values: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}

    def series(self, name: str, labels: dict[str, str]) -> _UntypedSeries:
        key = tuple(sorted((label, str(value)) for label, value in labels.items()))
        return _UntypedSeries(self.values.setdefault(name, {}), key)

    def collect(self) -> Iterable[Metric]:
        for name, by_labels in sorted(self.values.items()):
            names = sorted({label for labels in by_labels for label, _ in labels})
            family = UnknownMetricFamily(PREFIX + name, "", labels=names)
            for labels, value in sorted(by_labels.items()):
                given = dict(labels)
                family.add_metric([given.get(label, "") for label in names], value)
            yield family


class _UntypedSeries:
    def __init__(
        self, values: dict[tuple[tuple[str, str], ...], float], labels: tuple[tuple[str, str], ...]
    ) -> None:
        self._values = values
        self._labels = labels
        values.setdefault(labels, 0.0)

    def inc(self, amount: float = 1) -> None:
        self._values[self._labels] += amount

    def set(self, value: float) -> None:
        self._values[self._labels] = value


class Metrics:
    """The registry of one gateway process: its own, so two gateways in one process (tests,
    the benchmark) count apart."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._metrics: dict[str, Counter | Gauge | Histogram] = {}
        self._families: dict[str, Family] = {}
        for family in FAMILIES.values():
            self._declare(family)
        self._untyped = _Untyped()
        self.registry.register(self._untyped)
        # Each series once looked up: after its first use, recording is one dict lookup and
        # prometheus_client's own increment (the turn path records several per message).
        self._counting: dict[_Key, _Counting] = {}
        self._setting: dict[_Key, _Setting] = {}
        self._observing: dict[_Key, _Observing] = {}
        self._collectors: list[Collector] = []

    # -- recording -----------------------------------------------------------------------

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = (name, *labels.items())
        series = self._counting.get(key)
        if series is None:
            series = self._counting[key] = self._series(name, labels, "inc")
        series.inc(amount)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        key = (name, *labels.items())
        series = self._setting.get(key)
        if series is None:
            series = self._setting[key] = self._series(name, labels, "set")
        series.set(value)

    def observe(self, name: str, value: float, **labels: str) -> None:
        key = (name, *labels.items())
        series = self._observing.get(key)
        if series is None:
            series = self._observing[key] = self._series(name, labels, "observe")
        series.observe(value)

    def add_collector(self, collector: Collector) -> None:
        """`collector(metrics)` runs before each render, to set gauges read at scrape time."""
        self._collectors.append(collector)

    def _declare(self, family: Family) -> Counter | Gauge | Histogram:
        name, doc, labels = PREFIX + family.name, family.help or family.name, family.labels
        metric: Counter | Gauge | Histogram
        if family.kind == "counter":
            metric = Counter(name, doc, labels, registry=self.registry)
        elif family.kind == "gauge":
            metric = Gauge(name, doc, labels, registry=self.registry)
        else:
            metric = Histogram(name, doc, labels, registry=self.registry, buckets=family.buckets)
        self._metrics[family.name] = metric
        self._families[family.name] = family
        return metric

    def _series(self, name: str, labels: dict[str, str], method: str) -> Any:
        """The series `name` with `labels`, which has `method` (inc, set or observe)."""
        metric = self._metrics.get(name)
        if metric is None:
            log.warning("metric not declared name=%s", name)
            if method != "observe":
                return self._untyped.series(name, labels)
            metric = self._declare(Family(name, "histogram", "", tuple(sorted(labels))))
        declared = self._families[name]
        try:
            series = metric.labels(**labels) if labels or declared.labels else metric
        except ValueError:
            log.error(
                "metric recorded with the wrong labels name=%s labels=%s declared=%s",
                name,
                sorted(labels),
                list(declared.labels),
            )
            return _DROPPED
        if not hasattr(series, method):
            log.error("metric recorded the wrong way name=%s kind=%s", name, declared.kind)
            return _DROPPED
        return series

    # -- reading (tests, the console's overview) -------------------------------------------

    def counter(self, name: str, **labels: str) -> float:
        """The value of one series (a counter's or a gauge's); 0 if it was never recorded."""
        want = {k: str(v) for k, v in labels.items()}
        for sample in self._samples(name):
            if sample.name == PREFIX + name and sample.labels == want:
                return sample.value
        return 0.0

    value = counter

    def total(self, name: str, **labels: str) -> float:
        """The sum over every label set that includes `labels`."""
        want = {k: str(v) for k, v in labels.items()}.items()
        return sum(
            s.value
            for s in self._samples(name)
            if s.name == PREFIX + name and want <= s.labels.items()
        )

    def histogram_count(self, name: str, **labels: str) -> int:
        want = {k: str(v) for k, v in labels.items()}
        for sample in self._samples(name):
            if sample.name == f"{PREFIX}{name}_count" and sample.labels == want:
                return int(sample.value)
        return 0

    def _samples(self, name: str) -> Iterator[Sample]:
        source: PrometheusCollector = self._metrics.get(name) or self._untyped
        for family in source.collect():
            yield from family.samples

    # -- exposition ------------------------------------------------------------------------

    def render(self) -> str:
        """Everything in the Prometheus text format (`CONTENT_TYPE`), after the collectors ran."""
        for collect in self._collectors:
            try:
                collect(self)
            except Exception:  # a broken collector must not take /metrics down
                log.exception("metrics collector failed")
        return generate_latest(self.registry).decode()
