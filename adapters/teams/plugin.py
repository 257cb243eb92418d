"""The Teams platform as the gateway sees it: settings, when it runs, how it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.teams.settings import TeamsSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin

if TYPE_CHECKING:
    import httpx


def _build(settings: TeamsSettings, ctx: AdapterContext) -> Adapter:
    from adapters.teams.adapter import TeamsAdapter

    return TeamsAdapter(settings, ctx)


async def _check(settings: TeamsSettings, http: httpx.AsyncClient) -> CheckResult:
    """The bot's credentials get a token, and the issuer's signing keys can be fetched."""
    import httpx

    from adapters.teams.token import Certificate

    form = {
        "grant_type": "client_credentials",
        "client_id": settings.app_id,
        "scope": settings.token_scope,
    }
    try:
        if settings.certificate_path is not None:
            form["client_assertion_type"] = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            form["client_assertion"] = Certificate(settings.certificate_path).assertion(
                settings.app_id, settings.resolved_token_url
            )
        elif settings.app_password is not None:
            form["client_secret"] = settings.app_password.get_secret_value()
        token = await http.post(settings.resolved_token_url, data=form)
        metadata = await http.get(settings.openid_metadata_url)
    except (httpx.HTTPError, OSError, ValueError) as exc:
        return CheckResult(
            "teams", False, f"cannot reach Microsoft's sign-in ({type(exc).__name__})"
        )
    if token.status_code != 200:
        return CheckResult(
            "teams",
            False,
            f"Entra refused the bot's credentials (HTTP {token.status_code}); "
            "check CHATGATE_TEAMS__APP_ID and CHATGATE_TEAMS__APP_PASSWORD",
        )
    if metadata.status_code != 200:
        return CheckResult(
            "teams", False, f"the Bot Framework's OpenID metadata gave HTTP {metadata.status_code}"
        )
    return CheckResult("teams", True, f"app {settings.app_id} gets a token")


PLUGIN = PlatformPlugin(
    name="teams",
    title="Microsoft Teams",
    settings=TeamsSettings,
    enabled=lambda s: bool(s.app_id),
    build=_build,
    check=_check,
    requires=("microsoft_agents.activity", "microsoft_agents.hosting.core"),
    extra="teams",
    how_to_enable="CHATGATE_TEAMS__APP_ID with CHATGATE_TEAMS__APP_PASSWORD",
)
