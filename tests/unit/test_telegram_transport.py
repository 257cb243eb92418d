"""The Bot API transport honours HTTP(S)_PROXY and NO_PROXY, read once per origin rather
than from the environment on every request: checked through a real proxy on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from telegram.error import NetworkError

from adapters.telegram.transport import AiohttpRequest

OK = b'{"ok":true,"result":true}'


class RecordingProxy:
    """An HTTP proxy that answers every request itself and records its request line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.lines.append(head.split(b"\r\n", 1)[0].decode())
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(OK), OK)
        )
        await writer.drain()
        writer.close()


@pytest.fixture
async def proxy() -> AsyncIterator[RecordingProxy]:
    recorder = RecordingProxy()
    server = await asyncio.start_server(recorder.serve, "127.0.0.1", 0)
    recorder.port = server.sockets[0].getsockname()[1]
    async with server:
        yield recorder


async def test_requests_go_through_the_proxy_unless_no_proxy_names_the_host(
    proxy: RecordingProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("no_proxy", "direct.invalid")
    request = AiohttpRequest(pool_size=2, connect_timeout=2, read_timeout=2)
    await request.initialize()
    try:
        url = "http://api.telegram.invalid/bot123:secret/getMe"
        for _ in range(2):
            assert await request.do_request(url, "POST") == (200, OK)
        assert proxy.lines == [f"POST {url} HTTP/1.1"] * 2
        # NO_PROXY: connected directly, so the made-up host does not resolve.
        with pytest.raises(NetworkError):
            await request.do_request("http://direct.invalid/bot123:secret/getMe", "POST")
        assert len(proxy.lines) == 2
    finally:
        await request.shutdown()
