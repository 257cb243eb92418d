"""The web_fetch tool: fetch a public URL and give the model readable Markdown or text.

Pinning: for every hop (redirects are followed here, one at a time) the host is vetted by
`AddressGuard`, which returns checked IP addresses, and the request is sent to that IP with
the original `Host` header and, for HTTPS, the original name as SNI (httpx's documented
`sni_hostname` extension), so the certificate is still verified against the name. Nothing
resolves the name a second time, so DNS rebinding between check and connect has no effect.
Environment proxies are ignored (`trust_env=False`): a proxy would resolve names itself.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import Field

from gateway.sdk import ToolContext, ToolError, ToolFamily, ToolSpec, inline_code, untrusted
from tools.args import ToolArgs
from tools.web.netguard import Address, AddressGuard

GROUP = "web"
MAX_REDIRECTS = 5
USER_AGENT = "chatgate-web-fetch/0.1 (+https://github.com/chatgate)"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset({"text/plain", "text/markdown", "text/csv", "text/xml", "application/xml"})
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


class WebFetchArgs(ToolArgs):
    url: str = Field(description="The http:// or https:// URL to fetch.")
    offset: int = Field(default=0, ge=0, description="Character offset, to continue a long page.")


@dataclass(frozen=True)
class _Fetched:
    url: str
    media: str  # "": unknown (none sent, or octet-stream), decided from the body
    charset: str | None
    body: bytes
    cut_at_bytes: int | None


@dataclass(frozen=True)
class Page:
    url: str  # after redirects
    content_type: str
    text: str
    title: str = ""
    cut_at_bytes: int | None = None  # the body was larger than the size limit


class HTTPStatusError(ToolError):
    """The server answered with an error status (kept, e.g. for robots.txt rules)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RawPage:
    """A fetched body decoded to text but not converted, for callers that parse HTML."""

    url: str  # after redirects
    content_type: str
    text: str
    cut_at_bytes: int | None = None


class WebFetcher:
    """Fetches one URL under the SSRF guard, a time limit and a size limit."""

    def __init__(
        self,
        guard: AddressGuard,
        *,
        timeout: float = 20.0,
        max_bytes: int = 1_000_000,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._guard = guard
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._transport = transport

    async def fetch(self, url: str) -> Page:
        return await asyncio.to_thread(_render, await self._fetch_in_time(url))

    async def fetch_raw(self, url: str) -> RawPage:
        fetched = await self._fetch_in_time(url)
        media, text = await asyncio.to_thread(_decode, fetched)
        return RawPage(fetched.url, media, text, fetched.cut_at_bytes)

    async def _fetch_in_time(self, url: str) -> _Fetched:
        try:
            async with asyncio.timeout(self._timeout):
                return await self._fetch(url)
        except TimeoutError:
            raise ToolError(
                f"{url} did not answer within {self._timeout:.0f} s; try again later or use "
                "another source."
            ) from None

    async def _fetch(self, url: str) -> _Fetched:
        client = httpx.AsyncClient(
            transport=self._transport,
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(self._timeout),
            headers={
                "User-Agent": USER_AGENT,
                "Accept": "text/html,text/plain,application/json",
                # No brotli/zstd: fewer decoders to trust with a compression bomb.
                "Accept-Encoding": "gzip, deflate",
            },
        )
        async with client:
            current = _target(url)
            for _ in range(MAX_REDIRECTS + 1):
                host = current.raw_host.decode("ascii")  # IDNA form, as DNS knows it
                addresses = await self._guard.vet(host, _port(current))
                response = await _send(client, current, addresses)
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        current = _target(location, base=current)
                        continue
                    if response.status_code >= 400:
                        raise HTTPStatusError(
                            f"{current} answered HTTP {response.status_code} "
                            f"{response.reason_phrase}; check the URL or try another page.",
                            response.status_code,
                        )
                    media = _media_type(response, str(current))
                    body, cut = await self._read(response)
                    return _Fetched(str(current), media, response.charset_encoding, body, cut)
                finally:
                    await response.aclose()
        raise ToolError(f"{url} redirected more than {MAX_REDIRECTS} times; giving up.")

    async def _read(self, response: httpx.Response) -> tuple[bytes, int | None]:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > self._max_bytes:
                return b"".join(chunks)[: self._max_bytes], self._max_bytes
        return b"".join(chunks), None


def _target(url: str, *, base: httpx.URL | None = None) -> httpx.URL:
    try:
        parsed = base.join(url.strip()) if base is not None else httpx.URL(url.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise ToolError(f"{url!r} is not a valid URL ({exc}).") from None
    if parsed.scheme not in ("http", "https"):
        raise ToolError(f"only http:// and https:// URLs can be fetched, not {url!r}.")
    if not parsed.host:
        raise ToolError(f"{url!r} has no host name.")
    return parsed


def _port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


async def _send(
    client: httpx.AsyncClient, target: httpx.URL, addresses: list[Address]
) -> httpx.Response:
    """GET `target` from the first vetted address that accepts a connection."""
    host_header = target.netloc.decode("ascii")
    sni = target.raw_host.decode("ascii")
    last: Exception | None = None
    for address in addresses:
        request = client.build_request(
            "GET",
            target.copy_with(host=str(address)),
            headers={"Host": host_header},
            extensions={"sni_hostname": sni},
        )
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            last = exc
        except httpx.HTTPError as exc:
            raise ToolError(f"fetching {target} failed: {_describe(exc)}.") from None
    raise ToolError(f"could not connect to {target.host}: {_describe(last)}.")


def _describe(exc: Exception | None) -> str:
    text = (str(exc) or type(exc).__name__) if exc is not None else "no address"
    return text.rstrip(".")


def _media_type(response: httpx.Response, url: str) -> str:
    header: str = response.headers.get("content-type", "")
    media = header.split(";", 1)[0].strip().lower()
    if media in _HTML or media in _TEXT or media == "application/json" or media.endswith("+json"):
        return media
    if media in ("", "application/octet-stream"):
        return ""  # unknown: decided from the body
    raise ToolError(f"{url} is {media}; web_fetch reads only web pages, plain text and JSON.")


def _decode(fetched: _Fetched) -> tuple[str, str]:
    """The media type (sniffed when the server sent none) and the body as text."""
    url, media, body = fetched.url, fetched.media, fetched.body
    if not media:
        head = body[:512].lstrip().lower()
        if b"\x00" in body[:8192]:
            raise ToolError(f"{url} returned binary data; web_fetch reads only text.")
        media = "text/html" if head.startswith((b"<!doctype html", b"<html")) else "text/plain"
    return media, body.decode(_charset(fetched.charset, body, media), errors="replace")


def _render(fetched: _Fetched) -> Page:
    url, body = fetched.url, fetched.body
    media, text = _decode(fetched)
    title = ""
    if media in _HTML:
        match = _TITLE.search(body[:65536])
        if match:
            title = " ".join(match.group(1).decode("utf-8", errors="replace").split())
        text = html_to_markdown(text, url)
    elif media == "application/json" or media.endswith("+json"):
        text = _pretty_json(text)
    return Page(url, media, text.strip(), title, fetched.cut_at_bytes)


def _charset(declared: str | None, body: bytes, media: str) -> str:
    match = re.search(rb"charset=[\"']?([\w-]+)", body[:2048]) if media in _HTML else None
    name = declared or (match.group(1).decode("ascii") if match else "utf-8")
    try:
        "".encode(name)
    except LookupError:
        return "utf-8"
    return name


def html_to_markdown(html: str, base_url: str = "") -> str:
    import html2text  # with the first page converted, not at start

    converter = html2text.HTML2Text(baseurl=base_url, bodywidth=0)
    converter.ignore_images = True
    converter.unicode_snob = True
    converter.skip_internal_links = True
    text: str = converter.handle(html)
    # html2text leaves runs of blank lines where layout divs were.
    return re.sub(r"\n{3,}", "\n\n", text)


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=1, ensure_ascii=False)
    except ValueError:
        return text


class WebFetchTools(ToolFamily):
    """web_fetch: a public page as Markdown, through the SSRF guard of `fetcher`."""

    name = "web_fetch"

    def __init__(self, fetcher: WebFetcher, *, max_chars: int = 16000) -> None:
        self.fetcher = fetcher
        self.max_chars = max_chars

    async def web_fetch(self, args: WebFetchArgs, ctx: ToolContext) -> str:
        page = await self.fetcher.fetch(args.url)
        head = [f"URL: {page.url}"] + ([f"Title: {page.title}"] if page.title else [])
        if page.cut_at_bytes is not None:
            head.append(f"[page cut at {page.cut_at_bytes:,} bytes]")
        total = len(page.text)
        if args.offset >= total and total:
            head.append(f"[the page has {total:,} characters; offset is past the end]")
            return "\n".join(head)
        end = min(args.offset + self.max_chars, total)
        body = page.text[args.offset : end] or "(the page has no text)"
        if args.offset or end < total:
            more = f"; call again with offset={end} for more" if end < total else ""
            head.append(f"[characters {args.offset:,}-{end:,} of {total:,}{more}]")
        return "\n".join(head) + "\n\n" + body

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="web_fetch",
                description=(
                    "Fetch a public web page, plain text or JSON by URL and return it as Markdown. "
                    "Long pages come in parts: continue with offset."
                ),
                args=WebFetchArgs,
                handler=self.web_fetch,
                group=GROUP,
                untrusted_output=True,
                page_links=True,
                side_effects=untrusted.unseen_urls_check("web_fetch", lambda a: [a.url]),
                progress=lambda args: f"Fetching {inline_code(args.url)}",
            )
        ]
