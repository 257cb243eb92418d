"""The Telegram platform as the gateway sees it: settings, when it runs, how it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.telegram.settings import TelegramSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin, probe_api

if TYPE_CHECKING:
    import httpx


def _build(settings: TelegramSettings, ctx: AdapterContext) -> Adapter:
    from adapters.telegram.adapter import TelegramAdapter

    return TelegramAdapter(settings, ctx)


async def _check(settings: TelegramSettings, http: httpx.AsyncClient) -> CheckResult:
    assert settings.token is not None
    url = f"{settings.api_url.rstrip('/')}/bot{settings.token.get_secret_value()}/getMe"
    fix = "check CHATGATE_TELEGRAM__TOKEN (from @BotFather)"
    return await probe_api(http, "telegram", "GET", url, {}, "username", fix)


PLUGIN = PlatformPlugin(
    name="telegram",
    title="Telegram",
    settings=TelegramSettings,
    enabled=lambda s: s.token is not None and bool(s.token.get_secret_value()),
    build=_build,
    check=_check,
    requires=("telegram",),
    extra="telegram",
    how_to_enable="CHATGATE_TELEGRAM__TOKEN",
)
