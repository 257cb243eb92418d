"""Bounded downloads: a declared size over the limit is refused before reading, and a body
that keeps coming (no Content-Length) is cut off as soon as it passes the limit."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from gateway.media.fetch import read_limited
from gateway.sdk.channels import AttachmentTooLarge
from tests.fakes.server import LocalServer

ENDLESS = 200_000  # chunks of 1 KiB: far more than any socket buffer holds


class Streamer(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.chunks_sent = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/declared", self._declared)
        app.router.add_get("/endless", self._endless)

    async def _declared(self, request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000)

    async def _endless(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()  # chunked: no Content-Length to go by
        await response.prepare(request)
        try:
            for _ in range(ENDLESS):
                await response.write(b"y" * 1024)
                self.chunks_sent += 1
        except ConnectionError:
            pass  # the client hung up, as it should
        return response


async def test_limits_before_and_during_the_download() -> None:
    async with Streamer() as server, aiohttp.ClientSession() as session:
        base = f"http://127.0.0.1:{server.port}"
        async with session.get(f"{base}/declared") as response:
            with pytest.raises(AttachmentTooLarge, match="has 5,000 bytes; the limit is 4,000"):
                await read_limited(response, 4000)
        async with session.get(f"{base}/declared") as response:
            assert await read_limited(response, 5000) == b"x" * 5000
        async with session.get(f"{base}/endless") as response:
            assert response.content_length is None
            with pytest.raises(AttachmentTooLarge, match="more than 10,000 bytes"):
                await read_limited(response, 10_000)
    assert server.chunks_sent < ENDLESS  # the stream stopped when the client hung up
