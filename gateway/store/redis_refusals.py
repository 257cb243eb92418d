"""Redis errors that retrying will not mend: a refused username or password, a TLS handshake
that the settings make fail (the server's certificate not trusted, the client's own missing
or not trusted), and a server in the other protocol (redis_protocol.py). Each names the
settings to fix."""

from __future__ import annotations

import re
import ssl
from typing import Literal

from redis.asyncio.sentinel import MasterNotFoundError
from redis.exceptions import AuthenticationError

from gateway.store.redis_protocol import causes, wrong_protocol

Refused = Literal["servers", "sentinels"]
TlsFault = Literal["server certificate", "client certificate"]

# OpenSSL's reasons for a handshake that fails the same way every time with these settings.
# An EOF or reset in the middle of one (a server going down) is not among them.
_TLS_FAULTS: dict[str, TlsFault] = {
    "CERTIFICATE_VERIFY_FAILED": "server certificate",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "client certificate",
    "SSLV3_ALERT_BAD_CERTIFICATE": "client certificate",
    "TLSV1_ALERT_UNKNOWN_CA": "client certificate",
}

# redis-py names each sentinel it could not ask by the repr of its client, several KB each.
_SENTINEL_CLIENT = re.compile(
    r"<redis\.asyncio\.client\.Redis\(.*?host=([^,]+),port=(\d+),.*?\)>\)>\)>", re.S
)


def refused_login(exc: BaseException) -> tuple[Refused, str] | None:
    """Who refused the username or password, and in what words, when `exc` says so."""
    if isinstance(exc, MasterNotFoundError):
        # redis-py lists what each sentinel raised in the message, by the error's class.
        if AuthenticationError.__name__ in str(exc):
            return "sentinels", "every sentinel refused it"
        return None
    if isinstance(exc, AuthenticationError):
        return "servers", str(exc)
    return None


def tls_refusal(exc: BaseException) -> tuple[TlsFault, str] | None:
    """Which certificate the TLS handshake behind `exc` failed on, and OpenSSL's words, when
    it failed on one."""
    for cause in causes(exc):
        if isinstance(cause, ssl.SSLError):
            fault = _TLS_FAULTS.get(cause.reason or "")
            if fault is None:
                return None
            words = getattr(cause, "verify_message", None) or cause.reason.lower()
            return fault, words.replace("_", " ")
    return None


def refused(exc: BaseException) -> bool:
    """Retrying the same settings would meet the same answer."""
    return (
        refused_login(exc) is not None
        or tls_refusal(exc) is not None
        or wrong_protocol(exc) is not None
    )


def short_detail(exc: BaseException) -> str:
    """`exc` in one line, sentinels named by their address instead of their client's repr."""
    detail = _SENTINEL_CLIENT.sub(r"sentinel \1:\2", str(exc))
    return " ".join(detail.split()) or type(exc).__name__


def tls_problem(fault: TlsFault, words: str) -> str:
    if fault == "server certificate":
        return f"its certificate is not trusted here: {words}"
    return f"it refused this client's certificate: {words}"


def why_unreachable(exc: BaseException) -> str:
    """What a probe of one node met, for `chatgate doctor`'s topology line."""
    tls, mismatch = tls_refusal(exc), wrong_protocol(exc)
    if mismatch is not None:
        return "it speaks TLS only" if mismatch.server_tls else "it does not speak TLS"
    return f"TLS: {tls_problem(*tls)}" if tls else type(exc).__name__
