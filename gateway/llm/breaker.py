"""Circuit breakers: a provider (or one model) that keeps failing is left out for a while,
then let back in by one probe, a real request; a failed probe doubles the pause.

State is per process: each replica learns on its own, which costs at most one failed call
per replica per pause.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

State = Literal["closed", "open", "half_open"]


@dataclass
class _Breaker:
    failures: int = 0
    open_until: float = 0.0  # 0: closed
    pause: float = 0.0  # the current pause, doubled by each failed probe
    probe_until: float = 0.0  # a probe is out until then; others wait


class CircuitBreakers:
    def __init__(
        self,
        *,
        failures: int = 1,
        cooldown: float = 60.0,
        max_cooldown: float = 900.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold = failures
        self._cooldown = cooldown
        self._max = max(max_cooldown, cooldown)
        self._clock = clock
        self._breakers: dict[str, _Breaker] = {}

    def state(self, key: str) -> State:
        b = self._breakers.get(key)
        if b is None or not b.open_until:
            return "closed"
        return "open" if self._clock() < b.open_until else "half_open"

    def allows(self, key: str) -> bool:
        """Whether a request may go to `key` now. After the pause exactly one caller at a
        time gets through as the probe; its outcome (`succeeded`/`failed`) decides."""
        b = self._breakers.get(key)
        if b is None or not b.open_until:
            return True
        now = self._clock()
        if now < b.open_until or now < b.probe_until:
            return False
        # The probe's lease ends after a pause, in case its caller never reports back.
        b.probe_until = now + max(b.pause, self._cooldown)
        return True

    def retry_at(self, key: str) -> float:
        """When an open breaker lets a probe through (clock time); 0 when closed."""
        b = self._breakers.get(key)
        return b.open_until if b is not None else 0.0

    def succeeded(self, key: str) -> None:
        self._breakers.pop(key, None)

    def failed(self, key: str, *, at_least: float | None = None) -> bool:
        """Count a failure; returns True when the breaker is open now. `at_least` is a pause
        the server asked for (Retry-After)."""
        b = self._breakers.setdefault(key, _Breaker())
        b.failures += 1
        probing = bool(b.open_until)
        if not probing and b.failures < self._threshold:
            return False
        b.pause = min(self._max, b.pause * 2) if probing else self._cooldown
        if at_least is not None:
            b.pause = max(b.pause, at_least)
        b.open_until = self._clock() + b.pause
        b.probe_until = 0.0
        return True

    def open_keys(self) -> list[str]:
        return [key for key in self._breakers if self.state(key) != "closed"]
