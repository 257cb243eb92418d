"""The Mattermost adapter: REST API v4 and the WebSocket event stream over aiohttp.

The gateway finds it through `adapters.mattermost.plugin`; importing this package loads
nothing else until the adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MattermostAdapter"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adapters.mattermost import adapter

        return getattr(adapter, name)
    raise AttributeError(name)
