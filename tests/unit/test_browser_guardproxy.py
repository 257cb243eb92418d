"""The browser's guard proxy on its own, driven by httpx as a proxy client: what it forwards,
what it refuses, and that a refused request never reaches the server behind it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from tests.fakes.web_pages import (
    PAGES_HOST,
    PRIVATE_HOST,
    InternalServer,
    PageSite,
    loopback_connector,
    page_resolver,
)
from tools.web.browser.guardproxy import REFUSED_HEADER, GuardProxy
from tools.web.netguard import AddressGuard


@pytest_asyncio.fixture
async def servers() -> AsyncIterator[tuple[PageSite, InternalServer]]:
    async with PageSite() as site, InternalServer() as internal:
        site.internal_port = internal.port
        yield site, internal


@pytest_asyncio.fixture
async def proxy() -> AsyncIterator[tuple[GuardProxy, list[str]]]:
    off_machine: list[str] = []
    guard = AddressGuard([PAGES_HOST], resolver=page_resolver())
    server = GuardProxy(guard, connect=loopback_connector(off_machine))
    await server.start()
    yield server, off_machine
    await server.stop()


def client(proxy: GuardProxy) -> httpx.AsyncClient:
    return httpx.AsyncClient(proxy=proxy.url, trust_env=False, timeout=10)


async def test_forwards_requests_to_allowed_hosts(
    servers: tuple[PageSite, InternalServer], proxy: tuple[GuardProxy, list[str]]
) -> None:
    site, _ = servers
    guard_proxy, _ = proxy
    async with client(guard_proxy) as http:
        page = await http.get(f"{site.base}/shop")
        posted = await http.post(
            f"{site.base}/shop/order", data={"name": "Ana", "size": "m"}, follow_redirects=False
        )
    assert page.status_code == 200 and "Choose a shirt" in page.text
    assert page.headers["connection"] == "close"
    assert posted.status_code == 200 and "Order placed for Ana" in posted.text
    assert site.orders == [{"name": "Ana", "size": "m"}]
    assert site.hits == ["GET /shop", "POST /shop/order"]
    assert guard_proxy.take_refusals() == []


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:{port}/x", "127.0.0.1 is a loopback address"),
        ("http://localhost:{port}/x", "localhost resolves to 127.0.0.1, a loopback address"),
        ("http://2130706433:{port}/x", "2130706433 is a loopback address"),
        ("http://[::ffff:127.0.0.1]:{port}/x", "an IPv6 form of 127.0.0.1"),
        (f"http://{PRIVATE_HOST}/x", f"{PRIVATE_HOST} resolves to 10.0.0.7, a private address"),
        ("http://169.254.169.254/latest/", "a cloud metadata address"),
        ("http://nowhere.test/", "could not be resolved"),
    ],
)
async def test_refuses_internal_addresses_before_connecting(
    servers: tuple[PageSite, InternalServer],
    proxy: tuple[GuardProxy, list[str]],
    url: str,
    reason: str,
) -> None:
    _, internal = servers
    guard_proxy, off_machine = proxy
    async with client(guard_proxy) as http:
        response = await http.get(url.format(port=internal.port))
    assert response.status_code == 403
    assert response.headers[REFUSED_HEADER] == "1"
    assert reason in response.text
    (refusal,) = guard_proxy.take_refusals()
    # (httpx writes an IPv6 literal in the request line without its brackets)
    unbracketed = f"GET {url.format(port=internal.port)}".replace("[", "").replace("]", "")
    assert refusal.target.replace("[", "").replace("]", "") == unbracketed
    assert reason in refusal.reason
    assert internal.hits == [] and off_machine == []


async def test_tunnels_only_to_allowed_hosts(
    servers: tuple[PageSite, InternalServer], proxy: tuple[GuardProxy, list[str]]
) -> None:
    site, internal = servers
    guard_proxy, off_machine = proxy

    async def connect(authority: str) -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", guard_proxy.port)
        writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        await writer.drain()
        answer = await reader.readuntil(b"\r\n\r\n")
        if answer.startswith(b"HTTP/1.1 200"):
            # Speak plain HTTP inside the tunnel, as a websocket handshake would.
            writer.write(
                f"GET /js HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n".encode()
            )
            await writer.drain()
            answer += await reader.read()
        writer.close()
        return answer

    through = await connect(f"{PAGES_HOST}:{site.port}")
    assert through.startswith(b"HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK")
    assert b"Loading..." in through and site.hits == ["GET /js"]
    refused = await connect(f"127.0.0.1:{internal.port}")
    assert refused.startswith(b"HTTP/1.1 403 Forbidden")
    refused_v6 = await connect(f"[::1]:{internal.port}")
    assert refused_v6.startswith(b"HTTP/1.1 403 Forbidden")
    targets = [r.target for r in guard_proxy.take_refusals()]
    assert targets == [f"CONNECT 127.0.0.1:{internal.port}", f"CONNECT [::1]:{internal.port}"]
    assert internal.hits == [] and off_machine == []


async def test_the_browser_wide_proxy_refuses_everything(
    servers: tuple[PageSite, InternalServer],
) -> None:
    site, _ = servers
    deny_all = GuardProxy(None)
    await deny_all.start()
    try:
        async with client(deny_all) as http:
            response = await http.get(f"http://127.0.0.1:{site.port}/js")
        assert response.status_code == 403
        assert "only pages in a chat's browser may send requests" in response.text
        assert site.hits == []
    finally:
        await deny_all.stop()


async def test_malformed_requests_get_400(proxy: tuple[GuardProxy, list[str]]) -> None:
    guard_proxy, _ = proxy
    for raw in (
        b"NONSENSE\r\n\r\n",
        b"GET ftp://x/ HTTP/1.1\r\n\r\n",
        b"CONNECT x:0 HTTP/1.1\r\n\r\n",
    ):
        reader, writer = await asyncio.open_connection("127.0.0.1", guard_proxy.port)
        writer.write(raw)
        await writer.drain()
        answer = await reader.read()
        writer.close()
        assert answer.startswith(b"HTTP/1.1 400 Bad Request"), raw
