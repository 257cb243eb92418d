"""The browser's SSRF guard: a local HTTP proxy that every request of a browser context goes
through, so navigations, each redirect hop, subresources, fetch/XHR and websockets are all
vetted by the same `AddressGuard` as web_fetch.

Chromium hands the proxy the host name (plain HTTP as an absolute URL, HTTPS and websockets
as CONNECT), never resolving it itself; the proxy vets the name, connects to exactly the
vetted addresses, and answers 403 for anything else. TLS passes through untouched, so the
browser still checks certificates against the name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from gateway.sdk import ToolError
from tools.web.netguard import Address, AddressGuard, BlockedAddress

log = logging.getLogger(__name__)

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
Connector = Callable[[Address, int], Awaitable[Streams]]

MAX_HEAD = 64 * 1024  # bytes of request or response head the proxy reads
HEAD_TIMEOUT = 30.0  # seconds a client or server gets to send its head
CONNECT_TIMEOUT = 10.0
REFUSED_HEADER = "X-Chatgate-Refused"  # marks the proxy's own refusal pages
_CHUNK = 65536
# Headers that describe one hop, not the request: never forwarded.
_HOP = frozenset(
    {
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
    }
)


async def open_tcp(address: Address, port: int) -> Streams:
    return await asyncio.open_connection(str(address), port)


@dataclass(frozen=True)
class Refusal:
    target: str  # "GET http://127.0.0.1:8080/x" or "CONNECT 10.0.0.1:443"
    reason: str


class GuardProxy:
    """One proxy per browser context; remembers what it refused since the last `take_refusals`.

    With `guard=None` it refuses everything: that one serves Chromium itself, whose own
    requests (updates, sign-in, time queries) have no business leaving the machine.
    """

    def __init__(
        self,
        guard: AddressGuard | None,
        *,
        connect: Connector = open_tcp,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self._guard = guard
        self._connect = connect
        self._connect_timeout = connect_timeout
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._refusals: deque[Refusal] = deque(maxlen=50)
        self.requests = 0  # requests and tunnels seen, refused ones included
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    def take_refusals(self) -> list[Refusal]:
        """What was refused since the last call (oldest first)."""
        out = list(self._refusals)
        self._refusals.clear()
        return out

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("browser proxy failed on a request")
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await _read_head(reader)
        if head is None:
            return
        request_line, *header_lines = head.split(b"\r\n")
        parts = request_line.split(b" ")
        if len(parts) != 3:
            await _answer(writer, 400, "malformed request line")
            return
        method, target, version = parts
        self.requests += 1
        if method == b"CONNECT":
            await self._tunnel(target.decode("latin-1"), reader, writer)
        else:
            await self._forward(
                method, target.decode("latin-1"), version, header_lines, reader, writer
            )

    async def _open(
        self, label: str, host: str, port: int, client: asyncio.StreamWriter
    ) -> Streams | None:
        """Connect to a vetted address of host:port; or record why not, answer the client
        403 and return None."""
        reason = "only pages in a chat's browser may send requests"
        if self._guard is not None:
            try:
                addresses = await self._guard.vet(host, port)
                reason = f"could not connect to {host}:{port}"
            except ToolError as exc:
                addresses, reason = [], str(exc)
                log.info("browser request refused target=%s", label)
            for address in addresses:
                try:
                    async with asyncio.timeout(self._connect_timeout):
                        return await self._connect(address, port)
                except (OSError, TimeoutError):
                    continue
        await self._refuse(client, label, 403, reason)
        return None

    async def _refuse(
        self, client: asyncio.StreamWriter, label: str, status: int, reason: str
    ) -> None:
        self._refusals.append(Refusal(label, reason))
        await _answer(client, status, reason)

    async def _tunnel(
        self, authority: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        label = f"CONNECT {authority}"
        try:
            host, port = _split_authority(authority, default_port=443)
        except ValueError as exc:
            await self._refuse(writer, label, 400, str(exc))
            return
        upstream = await self._open(label, host, port, writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        await _pipe_both(reader, writer, up_reader, up_writer)

    async def _forward(
        self,
        method: bytes,
        url: str,
        version: bytes,
        header_lines: list[bytes],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        label = f"{method.decode('latin-1')} {url}"
        try:
            host, port, path = _split_url(url)
        except ValueError as exc:
            await self._refuse(writer, label, 400, str(exc))
            return
        upstream = await self._open(label, host, port, writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        upgrade = any(line.lower().startswith(b"upgrade:") for line in header_lines)
        kept = [line for line in header_lines if line and _name(line) not in _HOP]
        # One request per upstream connection keeps the proxy free of HTTP framing; a
        # websocket upgrade keeps its Connection header, which is what asks for it.
        kept.append(b"Connection: Upgrade" if upgrade else b"Connection: close")
        head = b"\r\n".join([b" ".join((method, path.encode("latin-1"), version)), *kept])
        up_writer.write(head + b"\r\n\r\n")
        await up_writer.drain()
        sending = asyncio.ensure_future(_pipe(reader, up_writer, half_close=True))
        try:
            if not upgrade:
                await _relay_response_head(up_reader, writer)
            await _pipe(up_reader, writer)
        finally:
            sending.cancel()
            with contextlib.suppress(BaseException):
                await sending
            up_writer.close()


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        async with asyncio.timeout(HEAD_TIMEOUT):
            data = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    if len(data) > MAX_HEAD:
        raise asyncio.LimitOverrunError("head too large", MAX_HEAD)
    return data[:-4]


async def _relay_response_head(up: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Forward the response heads (1xx ones included) with `Connection: close`, so the
    browser opens a new proxy connection for its next request."""
    while True:
        head = await _read_head(up)
        if head is None:
            return
        status_line, *lines = head.split(b"\r\n")
        informational = status_line[9:10] == b"1"
        kept = [line for line in lines if line and _name(line) not in _HOP]
        if not informational:
            kept.append(b"Connection: close")
        writer.write(b"\r\n".join([status_line, *kept]) + b"\r\n\r\n")
        await writer.drain()
        if not informational:
            return


async def _pipe(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, half_close: bool = False
) -> None:
    try:
        while chunk := await source.read(_CHUNK):
            sink.write(chunk)
            await sink.drain()
    except (OSError, asyncio.IncompleteReadError):
        return
    if half_close and sink.can_write_eof():
        with contextlib.suppress(OSError):
            sink.write_eof()


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    tasks = [
        asyncio.ensure_future(_pipe(reader, up_writer, half_close=True)),
        asyncio.ensure_future(_pipe(up_reader, writer, half_close=True)),
    ]
    try:
        # A tunnel ends when the server closes; the client's half-close alone does not end it.
        await tasks[1]
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        up_writer.close()


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    phrase = {400: "Bad Request", 403: "Forbidden"}.get(status, "Error")
    body = f"chatgate refused this request: {reason}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"{REFUSED_HEADER}: 1\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()


def _name(line: bytes) -> bytes:
    return line.split(b":", 1)[0].strip().lower()


def _split_authority(authority: str, *, default_port: int) -> tuple[str, int]:
    host, sep, port = authority.rpartition(":")
    if not sep or "]" in port:  # no port, or the colon was inside an IPv6 literal
        host, port = authority, str(default_port)
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{authority!r} is not a host:port")
    return host.strip("[]"), int(port)


def _split_url(url: str) -> tuple[str, int, str]:
    """host, port and origin-form path of an absolute http:// URL from the browser."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "ws"):
        raise ValueError(f"only http URLs go through the proxy as requests, not {url[:80]!r}")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        raise ValueError("URLs with credentials are not forwarded")
    host, port = _split_authority(authority, default_port=80)
    return host, port, slash + path if slash else "/"


__all__ = ["BlockedAddress", "Connector", "GuardProxy", "Refusal", "open_tcp"]
