"""Slack: mentions, DMs, threads, slash command and Block Kit buttons through slack-bolt.

The gateway finds it through `adapters.slack.plugin`; importing this package does not
import slack-bolt until an adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["SlackAdapter", "SlackStartError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adapters.slack import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
