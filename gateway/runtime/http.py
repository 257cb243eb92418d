"""The gateway's one HTTP server: health, readiness, metrics, and the platforms' webhooks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from gateway.runtime.metrics import CONTENT_TYPE, Metrics

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ReadinessCheck = Callable[[], Awaitable[str | None]]  # None when ready, else the reason
# Connections the kernel keeps waiting to be accepted (capped by net.core.somaxconn). aiohttp's
# 128 overflowed under a burst of webhook calls: a connection past it has its handshake
# dropped and the caller sends it again after a 1 s, then 3 s pause, so calls answered in
# milliseconds once accepted still waited seconds.
LISTEN_BACKLOG = 4096


class HttpServer:
    def __init__(self, host: str, port: int, metrics: Metrics) -> None:
        self._host = host
        self._port = port
        self._metrics = metrics
        self._checks: dict[str, ReadinessCheck] = {}
        self._app = web.Application(client_max_size=2 * 1024 * 1024)
        self._app.router.add_get("/healthz", self._healthz)
        self._app.router.add_get("/readyz", self._readyz)
        self._app.router.add_get("/metrics", self._metrics_page)
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        self._app.router.add_route(method, path, handler)

    def add_readiness_check(self, name: str, check: ReadinessCheck) -> None:
        self._checks[name] = check

    async def start(self) -> None:
        self._runner = web.AppRunner(self._app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port, backlog=LISTEN_BACKLOG)
        await site.start()
        # The port actually bound (port 0 asks the system for a free one).
        addresses = self._runner.addresses
        self.port = int(addresses[0][1]) if addresses else self._port
        log.info("http listening host=%s port=%s", self._host, self.port)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, request: web.Request) -> web.Response:
        problems = {}
        for name, check in self._checks.items():
            try:
                reason = await check()
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
            if reason:
                problems[name] = reason
        status = 503 if problems else 200
        return web.json_response({"ready": not problems, "problems": problems}, status=status)

    async def _metrics_page(self, request: web.Request) -> web.Response:
        page = self._metrics.render().encode()
        return web.Response(body=page, headers={"Content-Type": CONTENT_TYPE})
