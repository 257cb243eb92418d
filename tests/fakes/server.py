"""The lifecycle every fake server shares: an aiohttp app on 127.0.0.1 at a port the OS picks."""

from __future__ import annotations

from typing import Self

from aiohttp import web


class LocalServer:
    """Subclasses add their routes in `routes()` and close open sockets in `before_stop()`."""

    max_body = 1024 * 1024

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self.port = 0

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def before_stop(self) -> None:
        return None

    async def start(self) -> Self:
        app = web.Application(client_max_size=self.max_body)
        self.routes(app)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        await self.before_stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
