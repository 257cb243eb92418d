"""The Slack platform as the gateway sees it: settings, when it runs, how it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.slack.settings import SlackSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin, probe_api

if TYPE_CHECKING:
    import httpx


def _build(settings: SlackSettings, ctx: AdapterContext) -> Adapter:
    from adapters.slack.adapter import SlackAdapter

    return SlackAdapter(settings, ctx)


async def _check(settings: SlackSettings, http: httpx.AsyncClient) -> CheckResult:
    assert settings.bot_token is not None
    headers = {"Authorization": f"Bearer {settings.bot_token.get_secret_value()}"}
    url = settings.api_url.rstrip("/") + "/auth.test"
    fix = "check CHATGATE_SLACK__BOT_TOKEN (xoxb-...)"
    return await probe_api(http, "slack", "POST", url, headers, "user", fix)


PLUGIN = PlatformPlugin(
    name="slack",
    title="Slack",
    settings=SlackSettings,
    enabled=lambda s: s.bot_token is not None and bool(s.bot_token.get_secret_value()),
    build=_build,
    check=_check,
    requires=("slack_bolt", "slack_sdk"),
    extra="slack",
    how_to_enable=(
        "CHATGATE_SLACK__BOT_TOKEN (with CHATGATE_SLACK__APP_TOKEN or "
        "CHATGATE_SLACK__SIGNING_SECRET)"
    ),
)
