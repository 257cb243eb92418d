"""Opening an MCP client for one configured server: stdio (a child process), streamable HTTP,
or legacy SSE (a URL whose path ends in /sse).

Two things the SDK leaves to the caller are added here: the child's stderr is read line by line
(kept for failure reasons, logged at debug) instead of going to the gateway's stderr, and the
end of the server's message stream is reported, so a stdio server that dies while idle is
noticed at once rather than on the next call.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any, Literal, Self, TextIO
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.session import MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

from gateway.sdk import MCPServerSettings
from tools.shell.terminal.env import safe_env

log = logging.getLogger(__name__)

Mode = Literal["auto", "legacy"]
CLIENT_INFO = Implementation(name="chatgate", version="0.1.0")
_HTTP_TIMEOUT = 30.0  # connect, write and pool; reads of a held stream may take longer
_STREAM_READ_TIMEOUT = 300.0


def transport_kind(cfg: MCPServerSettings) -> Literal["stdio", "http", "sse"]:
    if cfg.command:
        return "stdio"
    return "sse" if urlsplit(cfg.url).path.rstrip("/").endswith("/sse") else "http"


class StderrTail:
    """Reads a child's stderr through a pipe, keeping the last lines for error reports."""

    def __init__(self, server: str, keep: int = 20) -> None:
        self._server = server
        self.lines: collections.deque[str] = collections.deque(maxlen=keep)
        self._writer: TextIO | None = None
        self._task: asyncio.Task[None] | None = None

    def open(self) -> TextIO:
        """The write end to hand to the child; call `spawned` once the child has it."""
        read_fd, write_fd = os.pipe()
        self._writer = os.fdopen(write_fd, "w")
        self._task = asyncio.create_task(self._read(read_fd), name=f"mcp {self._server} stderr")
        return self._writer

    def spawned(self) -> None:
        # The child holds its own copy; ours must go so the reader sees EOF when it exits.
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def close(self, grace: float = 1.0) -> None:
        self.spawned()
        if self._task is not None:
            # The last lines (why it exited) may still be in the pipe; a grandchild holding
            # it open must not hold up the caller.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def last(self) -> str:
        return self.lines[-1] if self.lines else ""

    async def _read(self, fd: int) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=64 * 1024)
        with os.fdopen(fd, "rb") as pipe:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
            try:
                while True:
                    try:
                        raw = await reader.readline()
                    except ValueError:  # a line over the limit: drop what was read
                        continue
                    if not raw:
                        return
                    line = raw.decode("utf-8", "replace").rstrip()
                    if line:
                        self.lines.append(line[:500])
                        log.debug("mcp stderr server=%s line=%s", self._server, line[:500])
            finally:
                transport.close()


class _WatchedReadStream:
    """The transport's read stream, telling `on_end` when the server's messages stop."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_end), write_stream


def server_env(cfg: MCPServerSettings) -> dict[str, str]:
    """A stdio server's environment: the commands' allowlist (no CHATGATE_* variable, nothing
    holding a secret) and the server's own configured `env` over it. The SDK adds only the
    same few names (PATH, HOME, USER ...) from this process."""
    own = {key: value.get_secret_value() for key, value in cfg.env.items()}
    return {**safe_env(), **own}


@asynccontextmanager
async def open_client(
    name: str,
    cfg: MCPServerSettings,
    *,
    message_handler: MessageHandlerFnT,
    on_stream_end: Callable[[], None],
    stderr: StderrTail,
    on_http_error: Callable[[int], None] = lambda _status: None,
    mode: Mode = "auto",
) -> AsyncIterator[Client]:
    """A connected, initialised client for the server; the child process (stdio) or HTTP
    session lives as long as the context."""
    async with AsyncExitStack() as stack:
        kind = transport_kind(cfg)
        transport: Any
        if kind == "stdio":
            params = StdioServerParameters(
                command=cfg.command,
                args=cfg.args,
                env=server_env(cfg),
                cwd=cfg.cwd.expanduser() if cfg.cwd else None,
            )
            transport = stdio_client(params, errlog=stderr.open())
        else:
            headers = {key: value.get_secret_value() for key, value in cfg.headers.items()}
            if kind == "sse":
                # SSE predates the 2026 protocol: skip the discover probe.
                mode = "legacy"
                transport = sse_client(
                    cfg.url,
                    headers=headers,
                    timeout=_HTTP_TIMEOUT,
                    sse_read_timeout=_STREAM_READ_TIMEOUT,
                )
            else:

                async def note_status(response: httpx2.Response) -> None:
                    # The SDK reports any HTTP error as one generic protocol error.
                    if response.status_code >= 400:
                        on_http_error(response.status_code)

                http = await stack.enter_async_context(
                    httpx2.AsyncClient(
                        headers=headers,
                        timeout=httpx2.Timeout(_HTTP_TIMEOUT, read=_STREAM_READ_TIMEOUT),
                        event_hooks={"response": [note_status]},
                    )
                )
                transport = streamable_http_client(cfg.url, http_client=http)
        client = Client(
            _watched(transport, on_stream_end),
            mode=mode,
            cache=None,  # the tool list is re-read on every change notification
            message_handler=message_handler,
            client_info=CLIENT_INFO,
        )
        try:
            await stack.enter_async_context(client)
        finally:
            stderr.spawned()
        yield client
