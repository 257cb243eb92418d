"""The garbage collector of a long-running gateway process, set once start-up is done.

Three things, each measured with bench/burst.py:

- What start-up built (modules, settings, tool schemas: ~100k objects) lives as long as the
  process. Frozen, it is left out of every collection, so a full one no longer walks it.
- A turn allocates thousands of container objects (request and reply dicts, coroutines,
  futures), nearly all freed by reference counting at once. With Python's default young
  threshold (700 allocations) the collector runs every few turns and, with a crowd waiting,
  keeps walking the same live objects: about 30% of the process's CPU in that run (2.43 ms
  a message; 1.65 ms with the collector off). At 50,000 it runs ~70 times less often and
  costs about what no collector would (1.64 ms); peak memory stayed the same (142 MB),
  since what cycles there are still get collected, just in larger batches.
- While a crowd of webhook calls arrives, every collection walks the thousands of requests,
  connections and updates still in flight, and frees next to nothing: in a burst of 10,000
  calls at once, a middle-generation collection took 152 ms and freed 0 objects, young ones
  8-23 ms each, all while calls waited for their answer. So automatic collection waits while
  intake is busy (`CrowdPause`), for at most `LONGEST_PAUSE` at a time, and resumes when the
  crowd has passed, collecting what cycles it left then.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Protocol

YOUNG_THRESHOLD = 50_000  # allocations between young collections (Python's default: 700)
# The longest the collector waits for one crowd: longer than a burst of 10,000 calls takes to
# be acknowledged (about 2 s), short enough that sustained overload still collects.
LONGEST_PAUSE = 5.0


def settle_collector() -> None:
    """Freeze what start-up built and space the young collections out (see above)."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


class Crowds(Protocol):
    """Intake's load as the collector sees it (gateway/intake/load.py)."""

    def when_busy(self, listener: Callable[[], None]) -> None: ...

    def when_quiet(self, listener: Callable[[], None]) -> None: ...


class CrowdPause:
    """Automatic collection held off from `hold` until `release`, or `longest` seconds."""

    def __init__(self, longest: float = LONGEST_PAUSE) -> None:
        self._longest = longest
        self._timer: asyncio.TimerHandle | None = None

    @property
    def holding(self) -> bool:
        return self._timer is not None

    def hold(self) -> None:
        if self._timer is not None or not gc.isenabled():
            return  # held already, or collection is off for another reason: leave it so
        gc.disable()
        self._timer = asyncio.get_running_loop().call_later(self._longest, self.release)

    def release(self) -> None:
        if self._timer is None:
            return
        self._timer.cancel()
        self._timer = None
        gc.enable()  # the next allocation past the threshold collects what the crowd left

    def follow(self, crowds: Crowds) -> None:
        """Hold while `crowds` is busy."""
        crowds.when_busy(self.hold)
        crowds.when_quiet(self.release)
