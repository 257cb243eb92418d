"""A TCP proxy in front of a real server that can lose replies: while `losing` is set, it
passes each request on, waits for the server's reply, and closes the client's connection
instead of passing the reply back. The request ran; its sender never heard so."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator


class ReplyLosingProxy:
    def __init__(self, host: str, port: int) -> None:
        self._upstream = (host, port)
        self.losing = 0  # replies still to lose
        self.lost = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"redis://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/0"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        ahead = asyncio.create_task(self._pump(reader, up_writer))
        back = asyncio.create_task(self._answer(up_reader, writer))
        self._tasks |= {ahead, back}
        await asyncio.wait([ahead, back], return_when=asyncio.FIRST_COMPLETED)
        for task in (ahead, back):
            task.cancel()
        for w in (writer, up_writer):
            w.close()
            with contextlib.suppress(OSError):
                await w.wait_closed()
        self._tasks -= {ahead, back}

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            if self.losing:
                self.losing -= 1
                self.lost += 1
                return  # the reply is dropped with the connection
            writer.write(data)
            await writer.drain()


@contextlib.asynccontextmanager
async def reply_losing_proxy(url: str) -> AsyncIterator[ReplyLosingProxy]:
    """A proxy in front of the Redis server at `url` (redis://host:port/...)."""
    host, _, port = url.split("//", 1)[1].split("/", 1)[0].rpartition(":")
    proxy = ReplyLosingProxy(host, int(port))
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.close()
