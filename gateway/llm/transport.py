"""An httpx transport that sends over aiohttp's connection pool.

The client keeps httpx's API (requests, responses, timeouts, streaming, errors);
only the wire layer changes. Why: with hundreds of turns in flight, httpcore's pool
spends more CPU choosing a connection than sending on it (it rescans every
connection for every request), and its per-request overhead is about three times
aiohttp's. Measured on the core benchmark, the LLM call went from ~3 ms to ~1 ms
of CPU per call. aiohttp is already a dependency (the HTTP server, discord.py,
slack_sdk).

`post` is the completion call's own path: a whole POST whose successful, unencoded
answer comes back as bytes, without httpx's request and response objects.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping

import aiohttp
import httpx

_SKIPPED = ("User-Agent", "Accept-Encoding", "Content-Type")  # the caller's headers say


class AiohttpTransport(httpx.AsyncBaseTransport):
    def __init__(self, *, max_connections: int, ssl_context: ssl.SSLContext) -> None:
        self._limit = max_connections
        self._ssl = ssl_context
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use: a ClientSession belongs to the running event loop.
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._limit, limit_per_host=self._limit, ssl=self._ssl, ttl_dns_cache=300
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # httpx decodes Content-Encoding itself
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with _as_httpx_errors(lambda: request):
            response = await self._client().request(
                request.method,
                str(request.url),
                headers=header_pairs(request.headers.raw),
                data=await request.aread(),
                timeout=_timeout(request.extensions.get("timeout", {})),
                allow_redirects=False,
                skip_auto_headers=_SKIPPED,
            )
        return httpx.Response(
            status_code=response.status,
            headers=header_pairs(response.raw_headers),
            stream=_ResponseStream(response, request),
            request=request,
        )

    async def post(
        self,
        url: str,
        headers: list[tuple[str, str]],
        body: bytes,
        timeouts: Mapping[str, float | None],
    ) -> bytes | httpx.Response:
        """POST `body` and read the whole answer: its bytes when it is a 2xx without a
        Content-Encoding (a completion's usual answer), else an httpx.Response, already read
        and decoded, for the caller's error handling. Fails with httpx's errors."""

        def request() -> httpx.Request:  # built only for an error or an unusual answer
            return httpx.Request("POST", url, headers=headers, content=body)

        with _as_httpx_errors(request):
            async with self._client().request(
                "POST",
                url,
                headers=headers,
                data=body,
                timeout=_timeout(timeouts),
                allow_redirects=False,
                skip_auto_headers=_SKIPPED,
            ) as response:
                content = await response.read()
                encoded = "Content-Encoding" in response.headers
                if 200 <= response.status < 300 and not encoded:
                    return content
                answer = httpx.Response(
                    status_code=response.status,
                    headers=header_pairs(response.raw_headers),
                    stream=httpx.ByteStream(content),
                    request=request(),
                )
        await answer.aread()  # decodes what Content-Encoding says
        return answer

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_any():
                yield chunk
        except TimeoutError as exc:
            raise httpx.ReadTimeout(str(exc) or "read timed out", request=self._request) from exc
        except aiohttp.ClientError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=self._request) from exc

    async def aclose(self) -> None:
        self._response.release()


def header_pairs(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """Raw (bytes) header pairs as aiohttp takes them."""
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw]


def _timeout(timeouts: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
    """httpx's timeouts (Timeout.as_dict()) as aiohttp's."""
    return aiohttp.ClientTimeout(
        total=None,
        connect=timeouts.get("pool"),
        sock_connect=timeouts.get("connect"),
        sock_read=timeouts.get("read"),
    )


@contextlib.contextmanager
def _as_httpx_errors(request: Callable[[], httpx.Request]) -> Iterator[None]:
    """aiohttp's failures as the httpx errors the client handles."""
    try:
        yield
    except aiohttp.ConnectionTimeoutError as exc:
        raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request()) from exc
    except TimeoutError as exc:  # no response (headers, or body for `post`) within the timeout
        raise httpx.ReadTimeout(str(exc) or "read timed out", request=request()) from exc
    except aiohttp.ClientConnectorError as exc:
        raise httpx.ConnectError(str(exc), request=request()) from exc
    except aiohttp.ClientError as exc:
        raise httpx.RemoteProtocolError(str(exc), request=request()) from exc
