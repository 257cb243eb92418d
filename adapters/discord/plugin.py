"""The Discord platform as the gateway sees it: settings, when it runs, how it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.discord.settings import DiscordSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin, probe_api

if TYPE_CHECKING:
    import httpx


def _build(settings: DiscordSettings, ctx: AdapterContext) -> Adapter:
    from adapters.discord.adapter import DiscordAdapter

    return DiscordAdapter(settings, ctx)


async def _check(settings: DiscordSettings, http: httpx.AsyncClient) -> CheckResult:
    assert settings.token is not None
    headers = {"Authorization": f"Bot {settings.token.get_secret_value()}"}
    url = settings.api_url.rstrip("/") + "/users/@me"
    fix = "check CHATGATE_DISCORD__TOKEN (Developer Portal > Bot)"
    return await probe_api(http, "discord", "GET", url, headers, "username", fix)


PLUGIN = PlatformPlugin(
    name="discord",
    title="Discord",
    settings=DiscordSettings,
    enabled=lambda s: s.token is not None and bool(s.token.get_secret_value()),
    build=_build,
    check=_check,
    requires=("discord",),
    extra="discord",
    how_to_enable="CHATGATE_DISCORD__TOKEN",
)
