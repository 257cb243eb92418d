"""Circuit breakers on a hand-driven clock: open after failures, one probe at a time after
the pause, a failed probe doubles the pause, success closes."""

from __future__ import annotations

from gateway.llm.breaker import CircuitBreakers


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_opens_probes_once_reopens_longer_and_closes() -> None:
    clock = Clock()
    breakers = CircuitBreakers(failures=1, cooldown=10, max_cooldown=25, clock=clock)
    assert breakers.allows("p") and breakers.state("p") == "closed"
    assert breakers.failed("p") is True
    assert breakers.state("p") == "open" and not breakers.allows("p")
    clock.now += 10
    assert breakers.state("p") == "half_open"
    assert breakers.allows("p")  # the probe
    assert not breakers.allows("p")  # only one at a time
    breakers.failed("p")  # the probe failed: out for twice as long
    clock.now += 19
    assert not breakers.allows("p")
    clock.now += 1
    assert breakers.allows("p")
    breakers.failed("p")
    assert breakers.retry_at("p") == clock.now + 25  # doubled to 40, capped at 25
    clock.now += 25
    assert breakers.allows("p")
    breakers.succeeded("p")
    assert breakers.state("p") == "closed" and breakers.allows("p") and breakers.allows("p")


def test_threshold_and_retry_after() -> None:
    clock = Clock()
    breakers = CircuitBreakers(failures=2, cooldown=5, clock=clock)
    assert breakers.failed("p") is False and breakers.allows("p")
    assert breakers.failed("p", at_least=30) is True
    assert breakers.retry_at("p") == clock.now + 30  # the server asked for longer
    assert breakers.open_keys() == ["p"]


def test_an_abandoned_probe_is_retried_after_a_pause() -> None:
    clock = Clock()
    breakers = CircuitBreakers(cooldown=10, clock=clock)
    breakers.failed("p")
    clock.now += 10
    assert breakers.allows("p")  # the caller never reports back (cancelled)
    clock.now += 5
    assert not breakers.allows("p")
    clock.now += 5
    assert breakers.allows("p")
