"""Signing in to the web pages: tokens, browser sessions, the sign-in rate limit, one-time
links (on the embedded store and on a real Redis, which replicas share)."""

from __future__ import annotations

import asyncio
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from gateway.store.base import Store
from gateway.web.auth import (
    BrowserSessions,
    Credentials,
    SignInLimiter,
    SignInLinks,
    client_address,
    same,
)
from gateway.web.settings import WebSettings

ADMIN = "admin-token-0123456789abcdef"
CAROL = "carol-token-0123456789abcdef"
ALICE = "alice-token-0123456789abcdef"


@pytest.fixture(params=["embedded", "redis"])
def store(request: pytest.FixtureRequest) -> Store:
    name = "embedded_store" if request.param == "embedded" else "redis_store"
    found: Store = request.getfixturevalue(name)
    return found


def test_tokens_sign_in_their_owners_only() -> None:
    credentials = Credentials(
        WebSettings(admin_token=ADMIN, operators={"carol": CAROL}, chat_tokens={ALICE: "alice"})
    )
    assert credentials.operator(ADMIN) == "admin"
    assert credentials.operator(CAROL) == "carol"
    assert credentials.operator(ALICE) is None  # a chat token opens no console
    assert credentials.chat_user(ALICE) == "alice"
    assert credentials.chat_user(CAROL) == "carol"  # operators may chat too
    for wrong in ("", ADMIN[:-1], ADMIN + "x", ADMIN.upper(), " " + ADMIN):
        assert credentials.operator(wrong) is None
        assert credentials.chat_user(wrong) is None
    assert same("a", "a") and not same("a", "b") and not same("a", "aa")


async def test_a_session_lasts_its_hours_and_only_for_its_kind(store: Store) -> None:
    sessions = BrowserSessions(store, hours=1 / 3600)  # one second
    cookie, session = await sessions.create("operator", "carol")
    found = await sessions.get(cookie, "operator")
    assert found is not None and found.name == "carol" and found.csrf == session.csrf
    assert await sessions.get(cookie, "chat") is None  # a console cookie is no chat cookie
    assert await sessions.get(cookie + "x", "operator") is None
    assert await sessions.get(None, "operator") is None
    await sessions.flash(cookie, session, "Saved.")
    assert await sessions.take_flash(cookie, session) == "Saved."
    assert await sessions.take_flash(cookie, session) == ""
    await asyncio.sleep(1.1)
    assert await sessions.get(cookie, "operator") is None
    other, _ = await BrowserSessions(store, hours=1).create("chat", "alice")
    await BrowserSessions(store, hours=1).end(other)
    assert await BrowserSessions(store, hours=1).get(other, "chat") is None


async def test_sign_in_attempts_are_limited_per_address(store: Store) -> None:
    limiter = SignInLimiter(store, per_minute=3)
    assert [await limiter.allow("10.0.0.1") for _ in range(4)] == [True, True, True, False]
    assert await limiter.allow("10.0.0.2")


async def test_a_burst_across_a_minute_boundary_gets_no_fresh_allowance(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    limiter = SignInLimiter(store, per_minute=2)
    clock = [60 * 1000 + 59.9]  # the last tenth of a second of a minute
    monkeypatch.setattr("gateway.web.auth.time.time", lambda: clock[0])
    assert [await limiter.allow("10.0.0.1"), await limiter.allow("10.0.0.1")] == [True, True]
    clock[0] += 0.2  # the next minute has begun
    assert not await limiter.allow("10.0.0.1")
    clock[0] += 30  # the first two are still inside the last 60 s
    assert not await limiter.allow("10.0.0.1")
    clock[0] += 120  # long after: the full allowance again
    assert [await limiter.allow("10.0.0.1") for _ in range(3)] == [True, True, False]


async def test_a_sign_in_link_works_once(store: Store) -> None:
    links = SignInLinks(store, hours=1)
    code = await links.create("erin")
    first, second = await asyncio.gather(links.redeem(code), links.redeem(code))
    assert {first, second} == {"erin", None}
    assert await links.redeem("made-up-code") is None
    assert await links.redeem("") is None


def _request(peer: str, *forwarded: str) -> web.Request:
    headers = CIMultiDict(("X-Forwarded-For", value) for value in forwarded)
    transport = mock.Mock()
    transport.get_extra_info.return_value = (peer, 50000)
    return make_mocked_request("POST", "/admin/login", headers=headers, transport=transport)


def test_the_limit_counts_the_peer_unless_it_is_a_trusted_proxy() -> None:
    proxies = WebSettings(trusted_proxies=["10.0.0.0/8", "::1"]).proxy_networks
    # No trusted proxies: the header is anybody's to write, so it is never read.
    assert client_address(_request("203.0.113.9", "198.51.100.1")) == "203.0.113.9"
    # From an untrusted peer the header is ignored even when proxies are configured.
    assert client_address(_request("203.0.113.9", "198.51.100.1"), proxies) == "203.0.113.9"
    # Through one trusted proxy: the client it saw.
    assert client_address(_request("10.1.2.3", "198.51.100.1"), proxies) == "198.51.100.1"
    assert client_address(_request("::1", "198.51.100.1"), proxies) == "198.51.100.1"
    # A client forging entries to the left does not escape its own count.
    forged = _request("10.1.2.3", "1.2.3.4, 198.51.100.7")
    assert client_address(forged, proxies) == "198.51.100.7"
    # Two trusted hops, over two header lines.
    chained = _request("10.1.2.3", "198.51.100.8, 10.9.9.9", "10.4.4.4")
    assert client_address(chained, proxies) == "198.51.100.8"
    # Nothing usable: the proxy's own address, never a made-up one.
    assert client_address(_request("10.1.2.3"), proxies) == "10.1.2.3"
    assert client_address(_request("10.1.2.3", "10.5.5.5"), proxies) == "10.1.2.3"
    assert client_address(_request("10.1.2.3", "not-an-address"), proxies) == "10.1.2.3"


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    assert len(WebSettings(trusted_proxies=["127.0.0.1", "fd00::/8"]).proxy_networks) == 2
    with pytest.raises(ValueError, match=r"'proxy\.local' is not an IP address or network"):
        WebSettings(trusted_proxies=["proxy.local"])
