"""Slash commands (/ask, /new, /stop, /status, /remind) as a discord.py app_commands tree.

Every command hands its text to one handler, which defers and submits it to admission, so
the gateway's own commands answer them exactly as they answer typed ones.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import discord
from discord import app_commands

log = logging.getLogger(__name__)

OnCommand = Callable[[discord.Interaction[Any], str], Awaitable[None]]

DESCRIPTIONS = {
    "ask": "Ask the assistant something",
    "new": "Start a new conversation in this channel or thread",
    "stop": "Stop the request I am working on here",
    "status": "Show this conversation's size, token use and queue",
    "remind": "Set a reminder, e.g. 'tomorrow 9:00 call Bob'",
}


def build_tree(
    client: discord.Client, on_command: OnCommand, helps: Mapping[str, str] | None = None
) -> app_commands.CommandTree[discord.Client]:
    """The command tree on `client`; `helps` overrides the descriptions with help texts."""
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)

    @app_commands.describe(prompt="What to ask")
    async def ask(interaction: discord.Interaction[Any], prompt: str) -> None:
        await on_command(interaction, prompt)

    async def new(interaction: discord.Interaction[Any]) -> None:
        await on_command(interaction, "/new")

    async def stop(interaction: discord.Interaction[Any]) -> None:
        await on_command(interaction, "/stop")

    async def status(interaction: discord.Interaction[Any]) -> None:
        await on_command(interaction, "/status")

    @app_commands.describe(when_and_text="When, then what, e.g. 'in 2h check the deploy'")
    async def remind(interaction: discord.Interaction[Any], when_and_text: str) -> None:
        await on_command(interaction, f"/remind {when_and_text}")

    for name, callback in (
        ("ask", ask),
        ("new", new),
        ("stop", stop),
        ("status", status),
        ("remind", remind),
    ):
        description = ((helps or {}).get(name) or DESCRIPTIONS[name])[:100]
        tree.add_command(
            app_commands.Command(name=name, description=description, callback=callback)
        )
    return tree


async def sync_commands(tree: app_commands.CommandTree[Any], guild_ids: list[str]) -> None:
    """Register the commands with Discord: per guild (instant, for development) or globally."""
    try:
        if not guild_ids:
            synced = await tree.sync()
            log.info("discord slash commands synced globally count=%d", len(synced))
            return
        for guild_id in guild_ids:
            guild = discord.Object(int(guild_id))
            tree.copy_global_to(guild=guild)
            synced = await tree.sync(guild=guild)
            log.info("discord slash commands synced guild=%s count=%d", guild_id, len(synced))
    except discord.Forbidden as exc:
        log.error(
            "discord refused the slash command sync (%s); invite the bot with the "
            "applications.commands scope",
            exc.text,
        )
    except discord.HTTPException as exc:
        log.error("discord slash command sync failed status=%s error=%r", exc.status, exc.text)
