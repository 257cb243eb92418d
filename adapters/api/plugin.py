"""The OpenAI-compatible API as a platform plugin: `[api]` settings; on when a key is set."""

from __future__ import annotations

from adapters.api.settings import ApiSettings
from gateway.sdk import Adapter, AdapterContext, PlatformPlugin, PlatformUnavailable


def _build(settings: ApiSettings, ctx: AdapterContext) -> Adapter:
    # Imported here: a gateway without API keys never loads the API's routes.
    from adapters.api.adapter import ApiAdapter
    from adapters.api.routes import ApiSite

    if ctx.http is None:
        raise PlatformUnavailable(
            "the API needs the gateway's HTTP server; set http.enabled = true"
        )
    adapter = ApiAdapter(ctx.store)
    ApiSite(adapter, settings, ctx).add_routes(ctx.http)
    return adapter


PLUGIN = PlatformPlugin(
    name="api",
    title="OpenAI-compatible API",
    settings=ApiSettings,
    enabled=lambda s: bool(s.keys),
    build=_build,
    how_to_enable='CHATGATE_API__KEYS=\'{"sk-...": "name"}\' (the API at /v1)',
)
