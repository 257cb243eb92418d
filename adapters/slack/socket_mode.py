"""Socket Mode: events over a WebSocket the gateway opens, so no public URL is needed.

Every replica may hold a connection; Slack hands each envelope to one of them (up to
10 connections per app). The URL is fetched once here first, because the SDK's connect
loop retries a refused app token forever instead of failing the start.
"""

from __future__ import annotations

import logging

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError

log = logging.getLogger(__name__)


class SocketModeError(RuntimeError):
    """Slack refused to open a Socket Mode connection."""


class SocketModeConnection:
    def __init__(self, app: AsyncApp, app_token: str) -> None:
        self._app = app
        self._app_token = app_token
        self._handler: AsyncSocketModeHandler | None = None

    async def start(self) -> None:
        try:
            opened = await self._app.client.apps_connections_open(app_token=self._app_token)
        except SlackApiError as exc:
            code = exc.response.get("error") or f"http_{exc.response.status_code}"
            raise SocketModeError(
                f"Slack refused Socket Mode ({code}); check CHATGATE_SLACK__APP_TOKEN "
                "(an xapp- token with connections:write) and that Socket Mode is on for the app"
            ) from None
        handler = AsyncSocketModeHandler(self._app, app_token=self._app_token)
        handler.client.wss_uri = str(opened["url"])
        await handler.connect_async()  # type: ignore[no-untyped-call]  # untyped in bolt
        self._handler = handler
        log.info("slack socket mode connected")

    async def connected(self) -> bool:
        return self._handler is not None and bool(await self._handler.client.is_connected())

    async def stop(self) -> None:
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]
            self._handler = None
