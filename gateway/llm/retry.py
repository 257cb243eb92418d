"""Retry timing: exponential backoff with full jitter, and reading a server's Retry-After."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

from gateway.runtime.backoff import FULL_JITTER, Backoff


def backoff_delay(attempt: int, base: float, cap: float) -> float:
    """Seconds to wait before retry number `attempt + 1`.

    Full jitter (uniform in [0, min(cap, base * 2**attempt)]) keeps many replicas that failed
    together from retrying together.
    """
    return Backoff(base, cap=cap, jitter=FULL_JITTER).delay(attempt + 1)


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a server asked for: `retry-after-ms`, or `Retry-After` in seconds or as a date."""
    millis = headers.get("retry-after-ms")
    if millis:
        seconds = _finite(millis)
        if seconds is not None:
            return max(seconds / 1000.0, 0.0)
    value = headers.get("retry-after")
    if not value:
        return None
    seconds = _finite(value)
    if seconds is not None:
        return max(seconds, 0.0)
    try:
        when = parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000" parses naive; HTTP dates are GMT anyway
        when = when.replace(tzinfo=UTC)
    current = time.time() if now is None else now
    return max(when.timestamp() - current, 0.0)


def _finite(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None
