"""The Discord adapter: discord.py on the gateway (leader-elected), slash commands, buttons.

The gateway finds it through `adapters.discord.plugin`; importing this package does not
import discord.py until the adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DiscordAdapter"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adapters.discord import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
