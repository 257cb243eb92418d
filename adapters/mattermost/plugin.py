"""The Mattermost platform as the gateway sees it: settings, when it runs, how it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.mattermost.settings import MattermostSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin, probe_api

if TYPE_CHECKING:
    import httpx


def _build(settings: MattermostSettings, ctx: AdapterContext) -> Adapter:
    from adapters.mattermost.adapter import MattermostAdapter

    return MattermostAdapter(settings, ctx)


async def _check(settings: MattermostSettings, http: httpx.AsyncClient) -> CheckResult:
    assert settings.token is not None
    headers = {"Authorization": f"Bearer {settings.token.get_secret_value()}"}
    url = settings.url.rstrip("/") + "/api/v4/users/me"
    fix = "check CHATGATE_MATTERMOST__URL and CHATGATE_MATTERMOST__TOKEN (the bot account's token)"
    return await probe_api(http, "mattermost", "GET", url, headers, "username", fix)


def _enabled(settings: MattermostSettings) -> bool:
    return bool(settings.url and settings.token and settings.token.get_secret_value())


PLUGIN = PlatformPlugin(
    name="mattermost",
    title="Mattermost",
    settings=MattermostSettings,
    enabled=_enabled,
    build=_build,
    check=_check,
    requires=("aiohttp",),
    extra="mattermost",
    how_to_enable="CHATGATE_MATTERMOST__URL and CHATGATE_MATTERMOST__TOKEN",
)
