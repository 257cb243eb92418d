"""How long to wait before trying again after failures in a row: exponential backoff with jitter,
or the wait the other side asked for (Retry-After), in one place for every retry loop.

The loops themselves stay where they are (each knows which failures are worth another try);
they ask a `Backoff` for the wait. It is a few lines on purpose: the store's command path
retries through it, where a retry library's per-call machinery would cost more than the
command.
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass

# The wait is multiplied by a random factor in [low, high]:
FULL_JITTER = (0.0, 1.0)  # anywhere up to the wait: replicas that failed together spread out
SPREAD = (0.8, 1.2)  # around the wait
NO_JITTER = (1.0, 1.0)


@dataclass(frozen=True)
class Backoff:
    """`first` seconds after the first failure, times `factor` after each further one, at most
    `cap`; then jittered."""

    first: float
    cap: float = math.inf
    factor: float = 2.0
    jitter: tuple[float, float] = NO_JITTER

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` failures in a row (1: the first)."""
        # Bounded exponent: a loop that fails for days must not overflow the float.
        grown = min(self.cap, self.first * self.factor ** min(max(failures - 1, 0), 64))
        low, high = self.jitter
        return grown * (low if low == high else random.uniform(low, high))

    async def wait(self, failures: int, asked: float | None = None) -> float:
        """Sleep before the next try: `asked` seconds when the other side said how long
        (Retry-After), else `delay(failures)`. Returns the seconds slept."""
        seconds = self.delay(failures) if asked is None else max(asked, 0.0)
        await asyncio.sleep(seconds)
        return seconds
