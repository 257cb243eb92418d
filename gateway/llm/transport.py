"""The LLM client's HTTP, on aiohttp end to end: one connection pool per client, made on
first use; answers read whole or as a stream of bytes; aiohttp's failures as one
`TransportError` the client handles.

Why aiohttp and not httpx for this traffic: with hundreds of turns in flight, httpcore's
pool spends more CPU choosing a connection than sending on it, and httpx's per-request
machinery (URL merging, cookies, auth and redirect flows, request and response objects)
costs more than the call itself. The figures are in ARCHITECTURE.md ("HTTP clients").
"""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass

import aiohttp
import certifi
from multidict import CIMultiDictProxy
from yarl import URL


class TransportError(Exception):
    """No answer: the connection failed or broke, or the server took longer than allowed."""

    def __init__(self, message: str, *, timed_out: bool) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(frozen=True)
class Answer:
    """A whole answer; `content` is decoded as its Content-Encoding says."""

    status: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class StreamingAnswer:
    """An answer whose body is still arriving (a streamed completion)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: CIMultiDictProxy[str] = response.headers

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives, in the sizes the network delivers."""
        with _failures():
            async for chunk in self._response.content.iter_any():
                yield chunk

    async def read(self) -> Answer:
        """The rest of the body, whole (an error, or a server that ignored stream=true)."""
        with _failures():
            content = await self._response.read()
        return Answer(self.status, self.headers, content)

    def release(self) -> None:
        """Give the connection back (to the pool when the body was read to its end)."""
        self._response.release()


@functools.cache
def model_tls() -> ssl.SSLContext:
    """The TLS settings of every model server's pool: certifi's CA bundle, loaded once (each
    load holds 0.5-1 MB and takes ~50 ms) and only when a base URL is https. A model on plain
    http gets aiohttp's default, which verifies with the system's CAs should a redirect
    lead to https."""
    return ssl.create_default_context(cafile=certifi.where())


class LLMTransport:
    """HTTP to one OpenAI-compatible server: `base_url` plus a path, with fixed headers."""

    def __init__(
        self,
        base_url: str,
        headers: Mapping[str, str],
        *,
        max_connections: int,
        timeout: float,
        connect_timeout: float,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._headers = list(headers.items())
        self._limit = max_connections
        # No total limit: a long stream is fine while its chunks keep coming.
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=connect_timeout, sock_read=timeout
        )
        self._urls: dict[str, URL] = {}
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        # Made on first use: a ClientSession belongs to the running event loop, and a client
        # that is built but never called opens nothing.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._limit,
                limit_per_host=self._limit,
                ssl=model_tls() if URL(self._base).scheme == "https" else True,
                ttl_dns_cache=300,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                timeout=self._timeout,
                trust_env=False,
            )
        return self._session

    def _url(self, path: str) -> URL:
        found = self._urls.get(path)
        if found is None:  # parsed once per path: the completion call's URL never changes
            found = self._urls[path] = URL(self._base + path)
        return found

    async def get(self, path: str) -> Answer:
        with _failures():
            async with self._client().get(
                self._url(path), headers=self._headers, allow_redirects=False
            ) as response:
                return Answer(response.status, response.headers, await response.read())

    async def post(
        self, path: str, body: bytes, headers: list[tuple[str, str]] | None = None
    ) -> Answer:
        """POST `body` as JSON and read the whole answer."""
        with _failures():
            async with self._client().post(
                self._url(path),
                headers=headers or self._headers,
                data=body,
                allow_redirects=False,
            ) as response:
                return Answer(response.status, response.headers, await response.read())

    async def stream(
        self, path: str, body: bytes, headers: list[tuple[str, str]]
    ) -> StreamingAnswer:
        """POST `body` and hand over the answer once its headers are in; the caller gives
        the connection back with `release()`."""
        with _failures():
            response = await self._client().post(
                self._url(path), headers=headers, data=body, allow_redirects=False
            )
        return StreamingAnswer(response)

    def headers_with(self, extra: Mapping[str, str]) -> list[tuple[str, str]]:
        """The fixed headers with `extra` added or replacing those of the same name."""
        names = {name.lower() for name in extra}
        kept = [(k, v) for k, v in self._headers if k.lower() not in names]
        return [*kept, *extra.items()]

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


@contextlib.contextmanager
def _failures() -> Iterator[None]:
    """aiohttp's failures as TransportError, with their own words."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise TransportError(str(exc) or "connect timed out", timed_out=True) from exc
    except TimeoutError as exc:  # no headers, or no next chunk, within the read timeout
        raise TransportError(str(exc) or "read timed out", timed_out=True) from exc
    except aiohttp.ClientError as exc:
        raise TransportError(str(exc) or type(exc).__name__, timed_out=False) from exc
