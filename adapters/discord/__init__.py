"""The Discord adapter: discord.py on the gateway (leader-elected), slash commands, buttons.

`gateway.app` creates `DiscordAdapter(settings.discord, ctx)` when `discord.token` is set.
"""

from adapters.discord.adapter import DiscordAdapter

__all__ = ["DiscordAdapter"]
