"""The discord.py clients: endpoint redirection, intents, and the gateway client for the adapter.

discord.py keeps its REST base (`Route.BASE`) and gateway URL (`DEFAULT_GATEWAY`) in class
attributes, so `configure_endpoints` is process-wide: one Discord bot per process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, cast

import aiohttp
import discord
import discord.gateway
import discord.http
import yarl

from adapters.discord.settings import DiscordSettings


class GatewayEvents(Protocol):
    """What the gateway client hands on (the adapter implements it)."""

    def on_gateway_ready(self, client: discord.Client) -> None: ...

    async def on_gateway_message(
        self, client: discord.Client, message: discord.Message
    ) -> None: ...

    async def on_gateway_press(self, interaction: discord.Interaction[Any], data: str) -> None: ...

    async def on_gateway_edit(
        self, client: discord.Client, before: discord.Message, after: discord.Message
    ) -> None: ...


def configure_endpoints(settings: DiscordSettings) -> None:
    # Route builds its URL when a request is made, so this must run before login().
    discord.http.Route.BASE = settings.api_url.rstrip("/")
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)


def gateway_intents() -> discord.Intents:
    """Guilds, guild and DM messages, and message content (privileged: enable it in the portal)."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.message_content = True
    return intents


class _Handlers:
    """discord.py calls `on_<event>` methods by name; these hand events to the adapter."""

    events: GatewayEvents

    async def on_ready(self) -> None:
        self.events.on_gateway_ready(cast(discord.Client, self))

    async def on_message(self, message: discord.Message) -> None:
        await self.events.on_gateway_message(cast(discord.Client, self), message)

    async def on_message_edit(self, before: discord.Message, after: discord.Message) -> None:
        """A cached message was edited (discord.py keeps the newest messages it saw)."""
        await self.events.on_gateway_edit(cast(discord.Client, self), before, after)

    async def on_button(self, interaction: discord.Interaction[Any], data: str) -> None:
        """Called by `ActionButton.callback` (see buttons.PressTarget)."""
        await self.events.on_gateway_press(interaction, data)


class GatewayClient(_Handlers, discord.Client):
    def __init__(
        self, events: GatewayEvents, settings: DiscordSettings, trace: aiohttp.TraceConfig
    ) -> None:
        super().__init__(
            intents=gateway_intents(),
            guild_ready_timeout=settings.guild_ready_timeout,
            chunk_guilds_at_startup=False,
            http_trace=trace,
        )
        self.events = events


class ShardedGatewayClient(_Handlers, discord.AutoShardedClient):
    def __init__(
        self, events: GatewayEvents, settings: DiscordSettings, trace: aiohttp.TraceConfig
    ) -> None:
        intents = gateway_intents()
        timeout = settings.guild_ready_timeout
        if settings.shard_ids is None:  # every shard in this process (under leader election)
            super().__init__(
                intents=intents,
                guild_ready_timeout=timeout,
                chunk_guilds_at_startup=False,
                shard_count=settings.shard_count,
                http_trace=trace,
            )
        else:
            super().__init__(
                intents=intents,
                guild_ready_timeout=timeout,
                chunk_guilds_at_startup=False,
                shard_ids=settings.shard_ids,
                shard_count=settings.shard_count,
                http_trace=trace,
            )
        self.events = events


def gateway_client(
    events: GatewayEvents, settings: DiscordSettings, trace: aiohttp.TraceConfig
) -> discord.Client:
    """An AutoShardedClient when sharding is configured, else a plain Client."""
    if settings.shard_count is not None:
        return ShardedGatewayClient(events, settings, trace)
    return GatewayClient(events, settings, trace)


def rest_client(trace: aiohttp.TraceConfig) -> discord.Client:
    """A client that only logs in (REST); every process sends through one."""
    # It never connects, so intents do not matter; `guilds` only silences discord.py's warning.
    return discord.Client(intents=discord.Intents(guilds=True), http_trace=trace)


def rate_limit_trace(on_429: Callable[[], None]) -> aiohttp.TraceConfig:
    """Hears every 429 Discord answers: discord.py waits them out inside its HTTP client,
    where nothing else would see them (the platform_rate_limited_total metric)."""
    trace = aiohttp.TraceConfig()

    async def on_request_end(
        session: aiohttp.ClientSession, context: Any, params: aiohttp.TraceRequestEndParams
    ) -> None:
        if params.response.status == 429:
            on_429()

    trace.on_request_end.append(on_request_end)
    return trace
