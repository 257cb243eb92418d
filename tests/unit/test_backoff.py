"""The one backoff helper every retry loop asks for its wait: growth, cap, jitter bounds, and
the wait the other side asked for (Retry-After) taking precedence."""

from __future__ import annotations

import math

from gateway.runtime.backoff import FULL_JITTER, NO_JITTER, SPREAD, Backoff


def test_without_jitter_the_wait_grows_by_the_factor_up_to_the_cap() -> None:
    doubling = Backoff(0.5)
    assert [doubling.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0]
    polling = Backoff(1.0, cap=30.0, factor=1.5, jitter=NO_JITTER)
    assert [polling.delay(n) for n in (1, 2, 3)] == [1.0, 1.5, 2.25]
    assert polling.delay(100) == 30.0
    assert doubling.delay(0) == 0.5  # no failure yet counts as the first


def test_jitter_stays_within_its_bounds_of_the_wait() -> None:
    for failures in range(1, 12):
        wait = min(1.0, 0.1 * 2 ** (failures - 1))
        full = Backoff(0.1, cap=1.0, jitter=FULL_JITTER).delay(failures)
        spread = Backoff(0.1, cap=1.0, jitter=SPREAD).delay(failures)
        assert 0.0 <= full <= wait
        assert 0.8 * wait <= spread <= 1.2 * wait


def test_days_of_failures_do_not_overflow() -> None:
    uncapped = Backoff(1.0)
    assert math.isfinite(uncapped.delay(10**9))
    assert Backoff(0.05, cap=2.0).delay(10**9) == 2.0


async def test_the_wait_asked_for_is_the_wait_slept() -> None:
    backoff = Backoff(30.0)  # its own wait would be long; what was asked for is used
    assert await backoff.wait(3, asked=0.01) == 0.01
    assert await backoff.wait(3, asked=-5.0) == 0.0
    assert await Backoff(0.01).wait(1) == 0.01
