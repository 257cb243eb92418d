"""Process-local counters, gauges and histograms with labels, exposed in the Prometheus text
format at /metrics.

Every metric is declared once in `FAMILIES` (its type, help text and, for histograms, its
buckets), so /metrics carries HELP and TYPE lines and the Grafana dashboard in deploy/ can
be checked against the names. A name used without a declaration is still exported, as
`untyped`, so a forgotten declaration loses nothing.
"""

from __future__ import annotations

import bisect
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

log = logging.getLogger(__name__)

PREFIX = "chatgate_"
SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_LONG_SECONDS = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
_STEPS = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 25.0, 50.0)

Kind = Literal["counter", "gauge", "histogram"]
_Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Family:
    name: str  # without the chatgate_ prefix
    kind: Kind
    help: str
    buckets: tuple[float, ...] = SECONDS


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        # intake
        Family("messages_total", "counter", "Messages submitted, by platform."),
        Family("refused_total", "counter", "Messages refused, by reason."),
        Family("duplicates_total", "counter", "Platform events dropped as repeats."),
        Family("commands_total", "counter", "Chat commands answered, by command."),
        Family("messages_queued_total", "counter", "Messages that waited behind a turn."),
        Family("queue_pending_messages", "gauge", "Messages stored, not yet answered (all)."),
        Family("queue_oldest_wait_seconds", "gauge", "Age of the oldest waiting message."),
        Family("turns_running", "gauge", "Turns running in this process."),
        Family(
            "queue_wait_seconds",
            "histogram",
            "Time from a message's arrival to the start of its turn.",
            (0.01, *SECONDS, 300.0),
        ),
        # turns
        Family("turns_total", "counter", "Turns finished, by status and profile."),
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
        Family("turn_seconds", "histogram", "Turn duration, by profile."),
        Family("turn_iterations", "histogram", "Model calls per turn, by profile.", _STEPS),
        Family("tool_calls_total", "counter", "Tool calls, by tool and outcome."),
        Family("tool_seconds", "histogram", "Tool call duration, by tool."),
        Family("deliveries_failed_total", "counter", "Replies a platform did not take."),
        # the model
        Family(
            "llm_request_seconds",
            "histogram",
            "LLM completion latency (retries included), by provider, model and outcome.",
        ),
        Family("llm_tokens_total", "counter", "Tokens used, by provider, model and kind."),
        Family("llm_cost_usd_total", "counter", "Cost in USD, by provider and model."),
        Family("llm_errors_total", "counter", "Failed LLM completions, by provider, model, kind."),
        Family("llm_fallbacks_total", "counter", "Turns moved to the next model of their chain."),
        Family("llm_breaker_open", "gauge", "1 while a provider or model is held out."),
        # budgets
        Family("budget_warnings_total", "counter", "Budget warnings given, by scope."),
        Family("budget_refusals_total", "counter", "Turns refused by a budget, by scope."),
        # approvals
        Family("approvals_pending", "gauge", "Approval requests waiting in this process."),
        Family("approvals_decided_total", "counter", "Approval requests decided, by outcome."),
        Family(
            "approvals_tampered_total",
            "counter",
            "Sealed store entries (approvals, answers, grants) that failed verification.",
        ),
        Family(
            "approval_decision_seconds",
            "histogram",
            "Time from an approval request to its decision.",
            _LONG_SECONDS,
        ),
        # scheduler and platforms
        Family("scheduler_runs_total", "counter", "Scheduled job runs, by kind and status."),
        Family("platform_sends_total", "counter", "Messages sent, by platform and outcome."),
        Family("platform_rate_limited_total", "counter", "429 answers from a platform API."),
        Family("stream_updates_total", "counter", "Drafts and edits of streamed replies."),
    )
}

Collector = Callable[["Metrics"], None]


class Metrics:
    def __init__(self) -> None:
        self._values: dict[tuple[str, _Labels], float] = defaultdict(float)
        self._histograms: dict[tuple[str, _Labels], list[int]] = {}
        self._sums: dict[tuple[str, _Labels], float] = defaultdict(float)
        self._collectors: list[Collector] = []

    # -- recording -----------------------------------------------------------------------

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        self._values[(name, _key(labels))] += amount

    def gauge(self, name: str, value: float, **labels: str) -> None:
        self._values[(name, _key(labels))] = value

    def observe(self, name: str, value: float, **labels: str) -> None:
        buckets = _family(name).buckets
        key = (name, _key(labels))
        counts = self._histograms.get(key)
        if counts is None:
            counts = self._histograms[key] = [0] * (len(buckets) + 1)
        counts[bisect.bisect_left(buckets, value)] += 1
        self._sums[key] += value

    def add_collector(self, collector: Collector) -> None:
        """`collector(metrics)` runs before each render, to set gauges read at scrape time."""
        self._collectors.append(collector)

    # -- reading (tests, /usage) -----------------------------------------------------------

    def counter(self, name: str, **labels: str) -> float:
        return self._values.get((name, _key(labels)), 0.0)

    value = counter

    def total(self, name: str, **labels: str) -> float:
        """The sum over every label set that includes `labels`."""
        want = set(labels.items())
        return sum(v for (n, key), v in self._values.items() if n == name and want <= set(key))

    def histogram_count(self, name: str, **labels: str) -> int:
        counts = self._histograms.get((name, _key(labels)))
        return sum(counts) if counts else 0

    # -- exposition ------------------------------------------------------------------------

    def render(self) -> str:
        for collect in self._collectors:
            try:
                collect(self)
            except Exception:  # a broken collector must not take /metrics down
                log.exception("metrics collector failed")
        by_family: dict[str, list[str]] = defaultdict(list)
        for (name, labels), value in sorted(self._values.items()):
            by_family[name].append(f"{PREFIX}{name}{_labels(labels)} {_number(value)}")
        for (name, labels), counts in sorted(self._histograms.items()):
            bounds = (*_family(name).buckets, float("inf"))
            running = 0
            for bound, count in zip(bounds, counts, strict=True):
                running += count
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                by_family[name].append(
                    f"{PREFIX}{name}_bucket{_labels((*labels, ('le', le)))} {running}"
                )
            by_family[name].append(
                f"{PREFIX}{name}_sum{_labels(labels)} {_number(self._sums[(name, labels)])}"
            )
            by_family[name].append(f"{PREFIX}{name}_count{_labels(labels)} {running}")
        lines: list[str] = []
        for name in sorted(by_family):
            family = FAMILIES.get(name)
            if family is not None:
                lines.append(f"# HELP {PREFIX}{name} {family.help}")
            lines.append(f"# TYPE {PREFIX}{name} {family.kind if family else 'untyped'}")
            lines.extend(by_family[name])
        return "\n".join(lines) + "\n"


def _family(name: str) -> Family:
    return FAMILIES.get(name) or Family(name, "histogram", "")


def _key(labels: dict[str, str]) -> _Labels:
    return tuple(sorted((k, str(v)) for k, v in labels.items()))


def _labels(labels: _Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value))
