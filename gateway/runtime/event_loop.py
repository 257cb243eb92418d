"""The event loop `chatgate run` runs on (settings.event_loop).

uvloop (libuv under asyncio's API) cuts the loop's own cost per socket read and timer, which
is much of a turn's CPU when the store is Redis: bench/telegram_throughput.py measured 17%
more messages a second on the embedded store and 34% on Redis. "auto" takes it where it is
installed (it is a dependency on Linux and macOS) and falls back to asyncio's loop elsewhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

from gateway.config import ConfigError

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
T = TypeVar("T")


def event_loop_runner(choice: EventLoopChoice) -> Callable[[Coroutine[Any, Any, T]], T]:
    """What runs a coroutine to completion on the chosen loop (`asyncio.run` or `uvloop.run`)."""
    if choice == "asyncio":
        return asyncio.run
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ConfigError(
                [
                    "event_loop: uvloop is not installed; `pip install uvloop`, or set "
                    'event_loop = "auto" (CHATGATE_EVENT_LOOP=auto)'
                ]
            ) from None
        return asyncio.run
    return uvloop.run


def loop_name() -> str:
    """The running loop's kind, for the start-up log line."""
    return (
        "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
    )
