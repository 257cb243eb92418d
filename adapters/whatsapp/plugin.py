"""The WhatsApp platform as the gateway sees it: settings, when it runs, how it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.whatsapp.settings import WhatsAppSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin, probe_api

if TYPE_CHECKING:
    import httpx


def _build(settings: WhatsAppSettings, ctx: AdapterContext) -> Adapter:
    from adapters.whatsapp.adapter import WhatsAppAdapter

    return WhatsAppAdapter(settings, ctx)


async def _check(settings: WhatsAppSettings, http: httpx.AsyncClient) -> CheckResult:
    assert settings.access_token is not None
    headers = {"Authorization": f"Bearer {settings.access_token.get_secret_value()}"}
    url = (
        f"{settings.api_url.rstrip('/')}/{settings.api_version}/{settings.phone_number_id}"
        "?fields=display_phone_number"
    )
    fix = "check CHATGATE_WHATSAPP__ACCESS_TOKEN and CHATGATE_WHATSAPP__PHONE_NUMBER_ID"
    return await probe_api(http, "whatsapp", "GET", url, headers, "display_phone_number", fix)


PLUGIN = PlatformPlugin(
    name="whatsapp",
    title="WhatsApp",
    settings=WhatsAppSettings,
    enabled=lambda s: s.access_token is not None and bool(s.access_token.get_secret_value()),
    build=_build,
    check=_check,
    requires=("aiohttp",),
    extra="whatsapp",
    how_to_enable=(
        "CHATGATE_WHATSAPP__ACCESS_TOKEN with CHATGATE_WHATSAPP__PHONE_NUMBER_ID, "
        "CHATGATE_WHATSAPP__APP_SECRET and CHATGATE_WHATSAPP__VERIFY_TOKEN"
    ),
)
