"""URL settings checked when the config is read: a scheme, a host and a port in range, so a
typo is one config error line instead of a traceback when the gateway first connects."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator


def check_url(value: str, schemes: tuple[str, ...]) -> str:
    """`value` (empty allowed) if it is a URL with one of `schemes`, a host and a valid port:
    a typo found here is one config error line, not a traceback when the gateway starts."""
    if not value:
        return value
    port_problem = ValueError("the port must be a number from 1 to 65535")
    try:
        parts = urlsplit(value)
    except ValueError:  # "http://[::1"
        raise ValueError("not a valid URL") from None
    try:
        port = parts.port
    except ValueError:  # not a number, or above 65535
        raise port_problem from None
    if parts.scheme not in schemes:
        raise ValueError("must start with " + " or ".join(f"{s}://" for s in schemes))
    if not parts.hostname:
        raise ValueError("needs a host name after the ://")
    if port == 0:
        raise port_problem
    return value


# URL settings checked as above; an empty one means "not set".
HttpURL = Annotated[str, AfterValidator(lambda value: check_url(value, ("http", "https")))]
WebSocketURL = Annotated[str, AfterValidator(lambda value: check_url(value, ("ws", "wss")))]


def check_redis_url(url: str) -> None:
    """Refuse now what would stop the gateway at its first store call (or silently pick
    another server: redis-py reads port 0 and a non-numeric db as the defaults)."""
    from redis.connection import parse_url  # only when a URL is set: the CLI starts light

    if url.startswith("unix://"):
        if not urlsplit(url).path:
            raise ValueError("unix:// needs the socket's path, e.g. unix:///run/redis.sock")
    else:
        check_url(url, ("redis", "rediss"))
        db = urlsplit(url).path.strip("/")
        if db and not db.isdigit():
            raise ValueError("the path is the database number, e.g. redis://host:6379/0")
    try:
        # redis-py's own reading: query options such as socket_timeout.
        options = parse_url(url)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise ValueError(str(exc)) from None
    _check_tls_files(url, options)


# The URL's TLS options that name a file (or, ssl_ca_path, a folder of CA certificates).
_TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")


def _check_tls_files(url: str, options: dict[str, object]) -> None:
    """A URL's TLS options name files that exist, and come with rediss://: redis-py would
    fail each connection with "No such file or directory" and no path, or (redis://) with a
    TypeError about an unexpected keyword argument."""
    given = [name for name in (*_TLS_FILES, "ssl_ca_path") if options.get(name)]
    if given and not url.startswith("rediss://"):
        raise ValueError(f"{given[0]} applies to TLS: the URL must start with rediss://")
    for name in given:
        path = Path(str(options[name])).expanduser()
        if name == "ssl_ca_path" and not path.is_dir():
            raise ValueError(f"{name} is not a folder (got {str(path)!r})")
        if name != "ssl_ca_path" and not path.is_file():
            raise ValueError(f"{name} does not point to a file (got {str(path)!r})")
