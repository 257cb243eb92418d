"""A Redis port that speaks the other protocol than the settings: TLS settings (`rediss://`,
redis.tls_*) towards a server without TLS, or plain towards a TLS-only port.

Neither fails in words that say so. A TLS handshake sent to a plain server waits until the
connect timeout (the server reads the handshake as the start of a command), after every
retry; a plain command sent to a TLS port is answered by a reset. After a failure of that
kind, one short probe in the other protocol tells which it is, so the store can refuse at
once and name the setting to change instead of reporting an outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import Iterator
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

PROBE_SECONDS = 1.0
# An address whose probe found nothing in the other protocol is not probed again for this
# long: a TLS server that stops answering (a network partition) fails each retry with a
# timeout, and would otherwise cost each one a probe as well.
QUIET_SECONDS = 60.0
_quiet_until: dict[tuple[str, int, bool], float] = {}  # (host, port, tls) -> monotonic time
# OpenSSL's reasons for a handshake whose peer answered something other than TLS.
_NOT_TLS_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}
)


class WrongProtocol(RedisConnectionError):
    """The server at this address speaks TLS where the settings speak plain, or the other way
    round: retrying will not mend it."""

    def __init__(self, address: str, *, server_tls: bool) -> None:
        self.address = address
        self.server_tls = server_tls
        if server_tls:
            words = f"{address} speaks TLS only, and these settings connect without TLS"
        else:
            words = f"{address} does not speak TLS, and these settings connect with TLS"
        super().__init__(words)


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what it was raised from or while handling, in turn: redis-py raises its
    ConnectionError from the socket's or the ssl module's error, or while handling it."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        yield cause
        cause = cause.__cause__ or cause.__context__


def wrong_protocol(exc: BaseException) -> WrongProtocol | None:
    """The WrongProtocol behind `exc`, if any."""
    return next((c for c in causes(exc) if isinstance(c, WrongProtocol)), None)


def _could_be_mismatch(exc: BaseException, *, tls: bool) -> bool:
    """Whether `exc` is how a connection in the wrong protocol fails: with TLS, a handshake
    that timed out or met something other than TLS; without, a reset or a close in place of
    the first reply. A refused connection (nothing listening) is neither."""
    for cause in causes(exc):
        if tls:
            if isinstance(cause, ssl.SSLError):
                return (cause.reason or "") in _NOT_TLS_REASONS
            if isinstance(cause, RedisTimeoutError | TimeoutError):
                return True
        elif isinstance(cause, ConnectionResetError) or "closed by server" in str(cause):
            return True
    return False


async def _speaks_plain(host: str, port: int) -> bool:
    """The server answers an inline PING the way Redis does (`+PONG`, or `-NOAUTH ...`)."""
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(b"PING\r\n")
                line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    return line[:1] in (b"+", b"-") and line.endswith(b"\r\n")


async def _speaks_tls(host: str, port: int) -> bool:
    """The server completes a TLS handshake (its certificate is not checked: only whether it
    speaks TLS at all), or ends it with a TLS alert."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA bundle: nothing is verified
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            _, writer = await asyncio.open_connection(host, port, ssl=context)
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()
    except ssl.SSLError as exc:
        return "ALERT" in (exc.reason or "")
    except (OSError, TimeoutError):
        return False
    return True


async def probe_mismatch(
    exc: BaseException, host: str, port: int, *, tls: bool
) -> WrongProtocol | None:
    """After a connection to host:port with (`tls`) or without TLS failed with `exc`: a
    WrongProtocol when the server speaks the other one, else None."""
    if not _could_be_mismatch(exc, tls=tls):
        return None
    address = (host, port, tls)
    if _quiet_until.get(address, 0.0) > time.monotonic():
        return None
    if await (_speaks_plain(host, port) if tls else _speaks_tls(host, port)):
        return WrongProtocol(f"{host}:{port}", server_tls=not tls)
    _quiet_until[address] = time.monotonic() + QUIET_SECONDS
    return None


class NamesWrongProtocol:
    """A redis-py connection whose failed connect looks once at whether the server speaks the
    other protocol, and then fails with WrongProtocol."""

    async def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
        except (RedisConnectionError, RedisTimeoutError) as exc:
            host, port = getattr(self, "host", None), getattr(self, "port", None)
            if not isinstance(host, str) or not isinstance(port, int):
                raise  # a Unix socket: no TLS there
            tls = getattr(self, "ssl_context", None) is not None
            mismatch = await probe_mismatch(exc, host, port, tls=tls)
            if mismatch is None:
                raise
            raise mismatch from exc
