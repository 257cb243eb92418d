"""The web chat as a platform plugin: `[web]` settings; on when a token lets someone in."""

from __future__ import annotations

from adapters.web.settings import WebSettings
from gateway.sdk import Adapter, AdapterContext, PlatformPlugin, PlatformUnavailable


def _build(settings: WebSettings, ctx: AdapterContext) -> Adapter:
    # Imported here: a gateway without the web chat never loads its pages, images or Markdown.
    from adapters.web.adapter import WebAdapter
    from adapters.web.site import WebChatSite

    if ctx.http is None:
        raise PlatformUnavailable(
            "the web chat needs the gateway's HTTP server; set http.enabled = true"
        )
    adapter = WebAdapter(ctx.store, max_upload_bytes=int(settings.max_upload_mb * 1_000_000))
    WebChatSite(adapter, settings, ctx).add_routes(ctx.http)
    return adapter


PLUGIN = PlatformPlugin(
    name="web",
    title="Web chat",
    settings=WebSettings,
    enabled=lambda s: s.chat_enabled,
    build=_build,
    requires=("jinja2", "markdown_it"),
    extra="web",
    how_to_enable="CHATGATE_WEB__ADMIN_TOKEN or web.chat_tokens (the web chat at /chat)",
)
