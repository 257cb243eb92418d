"""web_fetch against a local HTTP server: conversion, limits, and every SSRF route we know of."""

from __future__ import annotations

import asyncio
import ipaddress
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
import pytest_asyncio
from aiohttp import web

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from tools.web.fetch import WebFetcher, WebFetchTools
from tools.web.netguard import Address, AddressGuard, BlockedAddress, blocked_reason, parse_ip

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)

PAGE = """<!doctype html><html><head><title> The  Page </title>
<style>.x{color:red}</style><script>alert('x')</script></head>
<body><h1>Hello</h1><p>Read <a href="/docs">the docs</a>.</p><img src="a.png" alt="pic"></body>
</html>"""


class Site:
    """A tiny aiohttp server on 127.0.0.1 that records which paths were requested."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application(middlewares=[self._record])
        routes: dict[str, Route] = {
            "/page": lambda r: web.Response(text=PAGE, content_type="text/html"),
            "/text": lambda r: web.Response(text="just text"),
            "/json": lambda r: web.json_response({"a": [1, 2], "b": "ü"}),
            "/image": lambda r: web.Response(body=b"\x89PNG", content_type="image/png"),
            "/blob": lambda r: web.Response(body=b"\x00\x01\x02" * 10),  # octet-stream
            "/big": lambda r: web.Response(text="z" * 300_000),
            "/host": lambda r: web.Response(text=f"host={r.headers['Host']}"),
            "/missing": lambda r: web.Response(status=404, text="nope"),
            "/loop": lambda r: web.HTTPFound("/loop"),
            "/redirect": lambda r: web.HTTPFound(r.query["to"]),
            "/untyped": self._untyped,
            "/slow": self._slow,
        }
        for path, handler in routes.items():
            app.router.add_get(path, _handler(handler))
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.hits.append(request.path)
        response: web.StreamResponse = await handler(request)
        return response

    async def _untyped(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"<html><body><p>no type</p></body></html>")
        return response

    async def _slow(self, request: web.Request) -> web.Response:
        await asyncio.sleep(3)
        return web.Response(text="late")


# A route answers with a response (an HTTPException one is raised) or a coroutine of one.
Route = Callable[[web.Request], web.StreamResponse | Awaitable[web.StreamResponse]]


def _handler(fn: Route) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        result = fn(request)
        if isinstance(result, web.HTTPException):
            raise result
        return result if isinstance(result, web.StreamResponse) else await result

    return handle


@pytest_asyncio.fixture
async def site() -> AsyncIterator[Site]:
    server = Site()
    await server.start()
    yield server
    await server.stop()


def fake_resolver(table: dict[str, list[str]], calls: list[str] | None = None) -> Any:
    async def resolve(host: str, port: int) -> list[Address]:
        if calls is not None:
            calls.append(host)
        if host not in table:
            raise OSError("name not known")
        return [ipaddress.ip_address(a) for a in table[host]]

    return resolve


def fetch_tool(guard: AddressGuard, *, max_chars: int = 16000, **kwargs: Any) -> Any:
    (spec,) = WebFetchTools(WebFetcher(guard, **kwargs), max_chars=max_chars).specs()

    async def run(url: str, offset: int = 0) -> str:
        return await spec.handler(spec.args(url=url, offset=offset), CTX)

    return run


LOCAL = AddressGuard(["127.0.0.1"])


# -- content ---------------------------------------------------------------------------------


async def test_html_becomes_markdown(site: Site) -> None:
    out = await fetch_tool(LOCAL)(f"{site.base}/page")
    assert out.startswith(f"URL: {site.base}/page\nTitle: The Page\n\n# Hello")
    assert f"[the docs]({site.base}/docs)" in out
    assert "alert" not in out and "color:red" not in out and "pic" not in out


async def test_text_json_and_untyped(site: Site) -> None:
    fetch = fetch_tool(LOCAL)
    assert (await fetch(f"{site.base}/text")).endswith("\n\njust text")
    body = (await fetch(f"{site.base}/json")).split("\n\n", 1)[1]
    assert json.loads(body) == {"a": [1, 2], "b": "ü"}
    assert "no type" in await fetch(f"{site.base}/untyped")
    with pytest.raises(ToolError, match="returned binary data"):
        await fetch(f"{site.base}/blob")


async def test_other_content_types_are_refused(site: Site) -> None:
    with pytest.raises(ToolError, match="image/png; web_fetch reads only web pages"):
        await fetch_tool(LOCAL)(f"{site.base}/image")


async def test_http_errors_are_reported(site: Site) -> None:
    with pytest.raises(ToolError, match="answered HTTP 404 Not Found"):
        await fetch_tool(LOCAL)(f"{site.base}/missing")


async def test_size_limit_cuts_the_body(site: Site) -> None:
    out = await fetch_tool(LOCAL, max_bytes=50_000, max_chars=1000)(f"{site.base}/big")
    assert "[page cut at 50,000 bytes]" in out
    assert "[characters 0-1,000 of 50,000; call again with offset=1000 for more]" in out
    tail = await fetch_tool(LOCAL, max_bytes=50_000, max_chars=1000)(f"{site.base}/big", 49_500)
    assert "[characters 49,500-50,000 of 50,000]" in tail


async def test_time_limit(site: Site) -> None:
    with pytest.raises(ToolError, match="did not answer within 0 s"):
        await fetch_tool(LOCAL, timeout=0.3)(f"{site.base}/slow")


async def test_redirects_are_followed_then_capped(site: Site) -> None:
    fetch = fetch_tool(LOCAL)
    out = await fetch(f"{site.base}/redirect?to=/text")
    assert out.startswith(f"URL: {site.base}/text")
    with pytest.raises(ToolError, match=r"Invalid URL in location header.*'999\.1\.1\.1'\.$"):
        await fetch(f"{site.base}/redirect?to=http://999.1.1.1/")
    with pytest.raises(ToolError, match="redirected more than 5 times"):
        await fetch(f"{site.base}/loop")
    assert site.hits.count("/loop") == 6


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "gopher://x/", "x"])
async def test_only_http_urls(url: str) -> None:
    with pytest.raises(ToolError, match="only http:// and https://"):
        await fetch_tool(LOCAL)(url)


# -- SSRF ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("[::1]", "loopback"),
        ("2130706433", "loopback"),  # decimal
        ("0x7f000001", "loopback"),  # hex
        ("0177.0.0.1", "loopback|not a valid URL"),  # octal (httpx itself rejects this one)
        ("127.1", "loopback"),  # short form
        ("[::ffff:127.0.0.1]", "IPv6 form of 127.0.0.1"),
        ("[::ffff:7f00:1]", "IPv6 form of 127.0.0.1"),
        ("[64:ff9b::a00:1]", "IPv6 form of 10.0.0.1"),
        ("[2002:c0a8:101::1]", "IPv6 form of 192.168.1.1"),  # 6to4
        ("10.1.2.3", "private"),
        ("192.168.0.10", "private"),
        ("172.16.5.4", "private"),
        ("100.64.0.1", "not a public"),  # carrier-grade NAT
        ("169.254.169.254", "cloud metadata"),
        ("[fd00:ec2::254]", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("[fe80::1]", "link-local"),
        ("[fc00::5]", "private"),  # unique-local
        ("[fec0::1]", "site-local"),  # deprecated site-local, which Python counts as global
        ("[feff::2]", "site-local"),
        ("224.0.0.1", "multicast"),
        ("[ff02::1]", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("[::]", "unspecified"),
        ("240.0.0.1", "reserved"),
    ],
)
async def test_private_address_forms_are_refused(host: str, reason: str) -> None:
    guard = AddressGuard(resolver=fake_resolver({}))
    with pytest.raises(ToolError, match=reason):
        await fetch_tool(guard)(f"http://{host}/")


async def test_a_server_on_loopback_is_refused_unless_allowed(site: Site) -> None:
    with pytest.raises(BlockedAddress, match="loopback"):
        await fetch_tool(AddressGuard())(f"{site.base}/text")
    assert site.hits == []


async def test_decimal_form_of_the_real_server_is_refused(site: Site) -> None:
    with pytest.raises(BlockedAddress, match="loopback"):
        await fetch_tool(AddressGuard())(f"http://2130706433:{site.port}/text")
    assert site.hits == []


async def test_names_resolving_to_private_addresses_are_refused(site: Site) -> None:
    with pytest.raises(BlockedAddress, match=r"localhost resolves to .*loopback"):
        await fetch_tool(AddressGuard())(f"http://localhost:{site.port}/text")
    table = {"intranet.test": ["10.0.0.7"], "mixed.test": ["93.184.216.34", "192.168.1.2"]}
    guard = AddressGuard(resolver=fake_resolver(table))
    with pytest.raises(BlockedAddress, match=r"intranet\.test resolves to 10\.0\.0\.7"):
        await fetch_tool(guard)("http://intranet.test/")
    with pytest.raises(BlockedAddress, match=r"mixed\.test resolves to 192\.168\.1\.2"):
        await fetch_tool(guard)("https://mixed.test/")
    with pytest.raises(ToolError, match="could not be resolved"):
        await fetch_tool(guard)("http://unknown.test/")
    assert site.hits == []


async def test_a_name_resolving_to_site_local_ipv6_is_refused() -> None:
    calls: list[str] = []
    guard = AddressGuard(resolver=fake_resolver({"old-lan.test": ["fec0::17"]}, calls))
    with pytest.raises(BlockedAddress, match=r"old-lan\.test resolves to fec0::17, a site-local"):
        await fetch_tool(guard)("http://old-lan.test/")
    assert calls == ["old-lan.test"]


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/text",
        "http://[::1]:{port}/text",
        "http://2130706433:{port}/text",
        "http://localhost:{port}/text",
        "http://169.254.169.254/latest/meta-data/",
    ],
)
async def test_redirects_into_private_space_are_refused(site: Site, target: str) -> None:
    # site.test is allowed by name (it is the test server); where it redirects is not.
    table = {"site.test": ["127.0.0.1"], "localhost": ["127.0.0.1", "::1"]}
    guard = AddressGuard(["site.test"], resolver=fake_resolver(table))
    url = f"http://site.test:{site.port}/redirect?to=" + target.format(port=site.port)
    with pytest.raises(BlockedAddress, match="refused"):
        await fetch_tool(guard)(url)
    assert site.hits == ["/redirect"]


async def test_allowed_host_reaches_the_pinned_address_with_its_host_header(site: Site) -> None:
    calls: list[str] = []
    resolver = fake_resolver({"site.test": ["127.0.0.1"]}, calls)
    guard = AddressGuard(["Site.Test."], resolver=resolver)
    out = await fetch_tool(guard)(f"http://site.test:{site.port}/host")
    assert out.endswith(f"host=site.test:{site.port}")
    assert calls == ["site.test"]


async def test_unicode_host_names_are_resolved_and_allowed_in_idna_form(site: Site) -> None:
    calls: list[str] = []
    resolver = fake_resolver({"xn--bcher-kva.test": ["127.0.0.1"]}, calls)
    with pytest.raises(BlockedAddress, match="loopback"):
        await fetch_tool(AddressGuard(resolver=resolver))(f"http://bücher.test:{site.port}/text")
    allowed = AddressGuard(["bücher.test"], resolver=resolver)
    assert (await fetch_tool(allowed)(f"http://bücher.test:{site.port}/text")).endswith("just text")
    assert calls == ["xn--bcher-kva.test"] * 2


async def test_connection_is_pinned_to_the_vetted_address() -> None:
    """A DNS answer that changes after the check (rebinding) is never looked at: the request
    goes to the IP that was vetted, with the name only in Host and SNI."""
    answers = iter([["93.184.216.34"], ["127.0.0.1"]])
    calls: list[str] = []

    async def rebinding(host: str, port: int) -> list[Address]:
        calls.append(host)
        return [ipaddress.ip_address(a) for a in next(answers)]

    seen: list[httpx.Request] = []

    def respond(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text="public", headers={"content-type": "text/plain"})

    fetcher = WebFetcher(AddressGuard(resolver=rebinding), transport=httpx.MockTransport(respond))
    page = await fetcher.fetch("https://example.com/a?b=1")
    assert page.text == "public"
    assert calls == ["example.com"]
    (request,) = seen
    assert str(request.url) == "https://93.184.216.34/a?b=1"
    assert request.headers["host"] == "example.com"
    assert request.extensions["sni_hostname"] == "example.com"


# -- the guard's building blocks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("192.168.257", "192.168.1.1"),
        ("[::1]", "::1"),
        ("fe80::1%eth0", "fe80::1"),
        ("example.com", None),
        ("1.2.3.example", None),
    ],
)
def test_parse_ip_forms(text: str, expected: str | None) -> None:
    parsed = parse_ip(text)
    assert (str(parsed) if parsed else None) == expected


def test_parse_ip_rejects_overflowing_numbers() -> None:
    with pytest.raises(BlockedAddress, match="not a valid IP"):
        parse_ip("4294967296")


@pytest.mark.parametrize("public", ["93.184.216.34", "8.8.8.8", "2606:4700::1111"])
def test_public_addresses_pass(public: str) -> None:
    assert blocked_reason(ipaddress.ip_address(public)) is None
