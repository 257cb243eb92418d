"""Microsoft Teams: personal chats, group chats and channel threads over the Bot Framework.

The gateway finds it through `adapters.teams.plugin`; importing this package does not
import the Microsoft 365 Agents SDK until an adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TeamsAdapter", "TeamsStartError"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adapters.teams import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
