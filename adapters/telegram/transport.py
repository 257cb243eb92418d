"""python-telegram-bot's HTTP layer on aiohttp, through PTB's own extension point (BaseRequest).

PTB still builds every request and parses every answer; only the transport changes. httpx
costs several times the CPU of aiohttp per request (and httpcore scans its whole pool on
each one), which made the transport the largest cost of a message in the benchmark.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData
from yarl import URL

from gateway.sdk import AttachmentUnavailable
from gateway.sdk.media import read_limited

_DOWNLOAD_SECONDS = 120.0  # a whole file download; 20 MB at a slow 1.5 Mbit/s


class MaybeSent(TimedOut):
    """The request was sent and its answer did not come in time: Telegram may have carried
    it out. A send is not repeated after this (the person could get it twice)."""


class AiohttpRequest(BaseRequest):
    def __init__(
        self,
        *,
        pool_size: int,
        read_timeout: float = 5.0,
        write_timeout: float = 5.0,
        connect_timeout: float = 5.0,
        pool_timeout: float = 30.0,
    ) -> None:
        self._pool_size = pool_size
        self._read = read_timeout
        self._write = write_timeout
        self._connect = connect_timeout
        self._pool = pool_timeout
        self._session: aiohttp.ClientSession | None = None
        # The proxy of each origin (HTTPS_PROXY / NO_PROXY), read once: with trust_env
        # aiohttp reads the environment and parses ~/.netrc in a worker thread on every
        # request, which was 7% of the gateway's time under a burst.
        self._proxies: dict[str, tuple[URL | None, aiohttp.BasicAuth | None]] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._pool_size, ttl_dns_cache=300)
            # HTTPS_PROXY / NO_PROXY apply (_proxy), as they did with PTB's httpx default.
            self._session = aiohttp.ClientSession(
                connector=connector, headers={"User-Agent": self.USER_AGENT}
            )

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        # PTB's type for these (ODVInput) lives in its private modules: a number, None (no
        # limit), or BaseRequest.DEFAULT_NONE (not given: this request's own default).
        read_timeout: object = BaseRequest.DEFAULT_NONE,
        write_timeout: object = BaseRequest.DEFAULT_NONE,
        connect_timeout: object = BaseRequest.DEFAULT_NONE,
        pool_timeout: object = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        if self._session is None or self._session.closed:
            raise RuntimeError("AiohttpRequest is not initialized")
        read = _pick(read_timeout, self._read)
        connect = _pick(connect_timeout, self._connect)
        pool = _pick(pool_timeout, self._pool)
        # aiohttp has no write timeout of its own; a stalled upload ends at the read timeout.
        timeout = aiohttp.ClientTimeout(
            connect=None if pool is None or connect is None else pool + connect,
            sock_connect=connect,
            sock_read=read,
        )
        proxy, proxy_auth = self._proxy(url)
        try:
            async with self._session.request(
                method,
                url,
                data=_body(request_data),
                timeout=timeout,
                proxy=proxy,
                proxy_auth=proxy_auth,
            ) as response:
                return response.status, await response.read()
        except aiohttp.SocketTimeoutError as exc:  # sent; waiting for the answer ran out
            raise MaybeSent("Telegram did not answer in time") from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise TimedOut from exc
        except aiohttp.ClientError as exc:
            # Only the class name: aiohttp's messages can carry the URL, and so the token.
            raise NetworkError(f"aiohttp.{type(exc).__name__}") from exc

    async def download(self, url: str, max_bytes: int) -> bytes:
        """A file's bytes (getFile's URL), stopped past `max_bytes`; errors never show the
        URL, which holds the bot token."""
        if self._session is None or self._session.closed:
            raise AttachmentUnavailable("the Telegram adapter is not running")
        proxy, proxy_auth = self._proxy(url)
        try:
            async with self._session.get(
                url,
                timeout=aiohttp.ClientTimeout(total=_DOWNLOAD_SECONDS, sock_connect=self._connect),
                proxy=proxy,
                proxy_auth=proxy_auth,
            ) as response:
                if response.status != 200:
                    raise AttachmentUnavailable(f"Telegram answered HTTP {response.status}")
                return await read_limited(response, max_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise AttachmentUnavailable(
                f"the file could not be fetched ({type(exc).__name__})"
            ) from None

    def _proxy(self, url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        """The proxy for `url` from the environment (None: connect directly), as aiohttp's
        trust_env would pick it, looked up once per origin."""
        path = url.find("/", url.find("//") + 2)
        origin = url if path < 0 else url[:path]
        known = self._proxies.get(origin)
        if known is None:
            try:
                known = get_env_proxy_for_url(URL(origin))
            except LookupError:  # no proxy set for the scheme, or NO_PROXY names the host
                known = (None, None)
            self._proxies[origin] = known
        return known


def _pick(value: object, default: float) -> float | None:
    """The timeout a caller gave, or `default` where it gave none.

    PTB marks "not given" with `BaseRequest.DEFAULT_NONE` (a DefaultValue, as are the bot's
    configured defaults), so anything that is neither a number nor None means the default.
    """
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def _body(request_data: RequestData | None) -> Any:
    if request_data is None:
        return None
    fields = request_data.json_parameters
    files = request_data.multipart_data
    if not files:
        return fields  # form-encoded, as PTB sends it with httpx
    form = aiohttp.FormData()
    for name, value in fields.items():
        form.add_field(name, value)
    for name, (filename, content, mime_type) in files.items():
        form.add_field(name, content, filename=filename, content_type=mime_type)
    return form
