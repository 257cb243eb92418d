"""Process-local counters and latency summaries, exposed in Prometheus text format at /metrics."""

from __future__ import annotations

import bisect
from collections import defaultdict

_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    def __init__(self) -> None:
        self._counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = defaultdict(float)
        self._gauges: dict[str, float] = {}
        self._histograms: dict[str, list[int]] = {}
        self._sums: dict[str, float] = defaultdict(float)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        self._counters[(name, tuple(sorted(labels.items())))] += amount

    def gauge(self, name: str, value: float) -> None:
        self._gauges[name] = value

    def observe(self, name: str, seconds: float) -> None:
        counts = self._histograms.setdefault(name, [0] * (len(_BUCKETS) + 1))
        counts[bisect.bisect_left(_BUCKETS, seconds)] += 1
        self._sums[name] += seconds

    def counter(self, name: str, **labels: str) -> float:
        return self._counters.get((name, tuple(sorted(labels.items()))), 0.0)

    def render(self) -> str:
        lines: list[str] = []
        for (name, labels), value in sorted(self._counters.items()):
            label_text = ",".join(f'{k}="{v}"' for k, v in labels)
            lines.append(f"chatgate_{name}{{{label_text}}} {value:g}")
        for name, value in sorted(self._gauges.items()):
            lines.append(f"chatgate_{name} {value:g}")
        for name, counts in sorted(self._histograms.items()):
            running = 0
            for bound, count in zip((*_BUCKETS, float("inf")), counts, strict=True):
                running += count
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                lines.append(f'chatgate_{name}_bucket{{le="{le}"}} {running}')
            lines.append(f"chatgate_{name}_sum {self._sums[name]:g}")
            lines.append(f"chatgate_{name}_count {running}")
        return "\n".join(lines) + "\n"
