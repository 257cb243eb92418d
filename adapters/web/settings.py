"""The web chat's settings: the `[web]` section. The operator console reads the same section
(its tokens, the session length), and the core serves the console, so the fields and checks
live in gateway/web/settings.py; this is the platform's own name for them."""

from gateway.sdk.webkit import WebSettings as _WebSettings


class WebSettings(_WebSettings):
    """`[web]`: operator and chat tokens, sessions, sign-in links, uploads."""


__all__ = ["WebSettings"]
