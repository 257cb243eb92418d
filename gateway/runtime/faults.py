"""Crash points for the durability tests: with `CHATGATE_CRASH_AT=<point>` in its environment a
gateway process kills itself (SIGKILL, no cleanup) the first time it reaches that point.

The tests use them to stop a replica at the exact moments that matter (a message stored but
its turn not started; a reply sent but the turn not marked done) and check that another
replica answers the message exactly once. Unset, as in every real deployment, a point costs
one comparison.
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "after_intake",
    "after_reply_claimed",
    "before_finish",
    "after_steered",
    "discord_received",
    "mattermost_received",
    "telegram_received",
)
_ARMED = os.environ.get("CHATGATE_CRASH_AT", "")


def crash_point(name: str) -> None:
    assert name in POINTS, name
    if name == _ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
