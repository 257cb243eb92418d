"""Commands to one Redis server, many in flight on each of a few connections.

Redis answers the commands of one connection in the order they came, so a connection needs no
checkout: a caller writes its command (or a whole batch, in one write) and waits for as many
replies as it sent, matched in order. No command the store sends blocks server-side, so a
connection is never held up by one caller. This replaced redis-py's pool for the store's
commands: with 256 callers at once, a checkout and a timeout task per command cost redis-py
8.1 ~185 µs of CPU per command, this ~24 µs (replies parsed by hiredis), and bench/burst.py
answered 10,000 sessions in 27 s instead of 49 s.

Failures: a reply that does not come within `timeout` (counted from the oldest unanswered
command) drops the connection, and every command waiting on it fails with WireError; so does
a connection the server closed. A failed call is sent again on a new connection up to
`retries` times with a jittered backoff, as redis-py's Retry did. Redis's error replies come
back as ReplyError (raised by `call`, in place in the results of `many`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import ssl
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import hiredis
from redis.connection import SSLConnection, UnixDomainSocketConnection, parse_url

from gateway.runtime.backoff import FULL_JITTER, Backoff

Command = Sequence[str | int | float | bytes]

# Before sending a failed call again: up to 0.1 s, doubling, at most 1 s (as redis-py's Retry).
_BACKOFF = Backoff(0.1, cap=1.0, jitter=FULL_JITTER)


def _pack(command: Command) -> bytes:
    # hiredis's stub types the argument as a 1-tuple; any tuple of arguments is fine.
    packed: bytes = hiredis.pack_command(tuple(command))  # type: ignore[arg-type]
    return packed


class ReplyError(Exception):
    """An error reply from Redis (WRONGTYPE, NOSCRIPT, an error raised by a script...)."""

    @property
    def no_script(self) -> bool:
        """The server does not have the script (it restarted, or SCRIPT FLUSH)."""
        return str(self).startswith("NOSCRIPT")


def is_no_script(reply: Any) -> bool:
    """A reply in a batch saying the server lacks the script."""
    return isinstance(reply, ReplyError) and reply.no_script


class WireError(Exception):
    """Redis could not be reached, or stopped answering: nothing is known of the command."""


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script, run by its SHA1 (EVALSHA) and loaded when the server lacks it."""

    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())

    def command(self, keys: Sequence[str], args: Sequence[Any]) -> list[Any]:
        return ["EVALSHA", self.sha, len(keys), *keys, *args]


@dataclass(frozen=True, slots=True)
class Target:
    """Where and how to connect, read from a redis:// rediss:// or unix:// URL."""

    host: str = "localhost"
    port: int = 6379
    path: str | None = None  # a unix socket
    db: int = 0
    username: str | None = None
    password: str | None = None
    tls: ssl.SSLContext | None = None

    @classmethod
    def from_url(cls, url: str) -> Target:
        # redis-py's reading, so a URL means the same here as for the subscribers' pool.
        options: dict[str, Any] = parse_url(url)  # type: ignore[no-untyped-call]
        kind = options.get("connection_class")
        tls = None
        if kind is SSLConnection:
            tls = ssl.create_default_context(cafile=options.get("ssl_ca_certs"))
            if options.get("ssl_certfile"):
                tls.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"))
            if options.get("ssl_cert_reqs") in ("none", ssl.CERT_NONE):
                tls.check_hostname = False
                tls.verify_mode = ssl.CERT_NONE
        return cls(
            host=options.get("host", "localhost"),
            port=int(options.get("port", 6379)),
            path=options.get("path") if kind is UnixDomainSocketConnection else None,
            db=int(options.get("db", 0)),
            username=options.get("username"),
            password=options.get("password"),
            tls=tls,
        )

    def handshake(self) -> list[list[Any]]:
        commands: list[list[Any]] = []
        if self.password is not None:
            user = [self.username] if self.username else []
            commands.append(["AUTH", *user, self.password])
        if self.db:
            commands.append(["SELECT", self.db])
        return commands


class _Request:
    __slots__ = ("deadline", "future", "left", "replies")

    def __init__(self, future: asyncio.Future[list[Any]], count: int, deadline: float) -> None:
        self.future = future
        self.left = count
        self.replies: list[Any] = []
        self.deadline = deadline


class _Connection(asyncio.Protocol):
    """One connection: requests go out in order and their replies are matched in order."""

    def __init__(self, timeout: float) -> None:
        self._timeout = timeout
        self._reader = hiredis.Reader(encoding="utf-8", errors="replace", replyError=ReplyError)
        self._waiting: deque[_Request] = deque()
        self._transport: asyncio.Transport | None = None
        self._watch: asyncio.TimerHandle | None = None
        self._outgoing: list[bytes] = []  # written at the end of this pass of the loop
        self._loop = asyncio.get_running_loop()
        self.failed: WireError | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio's, but behave as one.
        self._transport = cast(asyncio.Transport, transport)

    def send(self, payload: bytes, count: int) -> asyncio.Future[list[Any]]:
        """Write `count` commands (packed) at once; the future gets their replies, in order."""
        if self.failed is not None:
            raise self.failed
        assert self._transport is not None
        future = self._loop.create_future()
        now = self._loop.time()
        self._waiting.append(_Request(future, count, now + self._timeout))
        if not self._outgoing:
            # What every caller sends in this pass goes in one write: one system call for
            # a burst's many commands.
            self._loop.call_soon(self._flush)
        self._outgoing.append(payload)
        if self._watch is None:
            self._watch = self._loop.call_at(now + self._timeout, self._check)
        return future

    def _flush(self) -> None:
        outgoing, self._outgoing = self._outgoing, []
        if self.failed is None and self._transport is not None:
            self._transport.writelines(outgoing)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while True:
            try:
                reply = self._reader.gets()
            except hiredis.ProtocolError as exc:
                self.fail(WireError(f"unreadable reply ({exc})"))
                return
            if reply is False:
                return
            request = self._waiting[0]
            request.replies.append(reply)
            request.left -= 1
            if request.left == 0:
                self._waiting.popleft()
                if not request.future.done():  # its caller may have given up (cancelled)
                    request.future.set_result(request.replies)

    def _check(self) -> None:
        """A reply overdue: the server is stuck or the network dropped; give up on it all."""
        self._watch = None
        if not self._waiting:
            return
        due = self._waiting[0].deadline
        if self._loop.time() >= due:
            self.fail(WireError(f"no reply within {self._timeout:g} s"))
        else:
            self._watch = self._loop.call_at(due, self._check)

    def connection_lost(self, exc: Exception | None) -> None:
        detail = f"connection lost ({exc})" if exc else "connection closed by the server"
        self.fail(WireError(detail))

    def fail(self, error: WireError) -> None:
        if self.failed is None:
            self.failed = error
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._transport is not None:
            self._transport.abort()
        while self._waiting:
            request = self._waiting.popleft()
            if not request.future.done():
                request.future.set_exception(self.failed)


class RedisWire:
    """The store's client: `call` for one command, `many` for a batch in one round trip."""

    def __init__(
        self,
        url: str,
        *,
        connections: int = 2,
        timeout: float = 5.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
        scripts: Sequence[Script] = (),
    ) -> None:
        if connections < 1:
            raise ValueError(f"connections must be at least 1, got {connections}")
        self.target = Target.from_url(url)
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._retries = retries
        # Loaded on every new connection: a fresh or restarted server has none, and a burst
        # would otherwise send each script once, get NOSCRIPT for every call, and send again.
        self._scripts = tuple(scripts)
        self._open: list[_Connection | None] = [None] * connections
        self._opening: list[asyncio.Task[_Connection] | None] = [None] * connections
        self._turn = 0
        self._closed = False

    async def call(self, *command: str | int | float | bytes) -> Any:
        [reply] = await self._send(_pack(command), 1)
        if isinstance(reply, ReplyError):
            raise reply
        return reply

    async def many(self, commands: Sequence[Command], *, transaction: bool = False) -> list[Any]:
        """Replies in order, error replies in place. With `transaction`, the commands run as
        one MULTI/EXEC block (all or nothing, nothing in between)."""
        if not commands:
            return []
        packed = [_pack(c) for c in commands]
        if not transaction:
            return await self._send(b"".join(packed), len(packed))
        packed = [_pack(("MULTI",)), *packed, _pack(("EXEC",))]
        replies = await self._send(b"".join(packed), len(packed))
        queued = next((r for r in replies[:-1] if isinstance(r, ReplyError)), None)
        if queued is not None:  # a command was refused while queueing: EXEC ran nothing
            raise queued
        if isinstance(replies[-1], ReplyError):
            raise replies[-1]
        return list(replies[-1])

    async def _send(self, payload: bytes, count: int) -> list[Any]:
        attempt = 0
        while True:
            try:
                self._turn = slot = (self._turn + 1) % len(self._open)
                connection = self._open[slot]
                if connection is None or connection.failed is not None:
                    connection = await self._connect(slot)
                return await connection.send(payload, count)
            except WireError:
                if attempt >= self._retries or self._closed:
                    raise
                attempt += 1
                await _BACKOFF.wait(attempt)

    async def _connect(self, slot: int) -> _Connection:
        if self._closed:
            raise WireError("the store is closed")
        opening = self._opening[slot]
        if opening is None:
            # One attempt per slot, whoever asks meanwhile waits for it.
            opening = self._opening[slot] = asyncio.create_task(self._open_one(slot))
            # Its failure is read by whoever waits; with nobody left waiting, here.
            opening.add_done_callback(lambda task: task.cancelled() or task.exception())
        try:
            return await asyncio.shield(opening)
        finally:
            if opening.done() and self._opening[slot] is opening:
                self._opening[slot] = None

    async def _open_one(self, slot: int) -> _Connection:
        connection: _Connection | None = None
        try:
            async with asyncio.timeout(self._connect_timeout):
                connection = await self._dial()
                await self._greet(connection)
        except (TimeoutError, OSError, WireError) as exc:
            if connection is not None:
                connection.fail(WireError("handshake failed"))
            if isinstance(exc, WireError):
                raise
            if isinstance(exc, TimeoutError):
                raise WireError(f"no connection within {self._connect_timeout:g} s") from None
            raise WireError(exc.strerror or str(exc)) from None
        if self._closed:
            connection.fail(WireError("the store is closed"))
            raise WireError("the store is closed")
        self._open[slot] = connection
        return connection

    async def _dial(self) -> _Connection:
        target, loop = self.target, asyncio.get_running_loop()
        if target.path is not None:
            _, connection = await loop.create_unix_connection(
                lambda: _Connection(self._timeout), target.path
            )
            return connection
        transport, connection = await loop.create_connection(
            lambda: _Connection(self._timeout),
            target.host,
            target.port,
            ssl=target.tls,
            server_hostname=target.host if target.tls else None,
        )
        _keep_alive(transport.get_extra_info("socket"))
        return connection

    async def _greet(self, connection: _Connection) -> None:
        """Log in, pick the database, load the scripts: before any caller's command."""
        handshake = self.target.handshake()
        handshake += [["SCRIPT", "LOAD", script.source] for script in self._scripts]
        if not handshake:
            return
        replies = await connection.send(b"".join(_pack(c) for c in handshake), len(handshake))
        for reply in replies:
            if isinstance(reply, ReplyError):
                raise WireError(f"refused: {reply}")

    async def close(self) -> None:
        self._closed = True
        for task in self._opening:
            if task is not None:
                task.cancel()
        for connection in self._open:
            if connection is not None:
                connection.fail(WireError("the store is closed"))
        self._open = [None] * len(self._open)


def _keep_alive(sock: socket.socket | None) -> None:
    """TCP keepalive as redis-py sets it: a peer gone silently (a NAT that dropped an idle
    connection) is noticed in under a minute, not at the next command's timeout."""
    if sock is None:
        return
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, option, value in options:
        with contextlib.suppress(OSError):
            sock.setsockopt(level, option, value)


class Wire(Protocol):
    """What the store's parts send commands through: a RedisWire (the tests also pass one
    over a fakeredis client, tests/fakeredis_wire.py)."""

    async def call(self, *command: str | int | float | bytes) -> Any: ...

    async def many(
        self, commands: Sequence[Command], *, transaction: bool = False
    ) -> list[Any]: ...

    async def close(self) -> None: ...
