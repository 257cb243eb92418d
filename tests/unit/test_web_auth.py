"""Signing in to the web pages: tokens, browser sessions, the sign-in rate limit, one-time
links (on the embedded store and on a real Redis, which replicas share), and sessions and links
that something else wrote into the store."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from gateway.approvals.seals import EntrySigner
from gateway.runtime.metrics import Metrics
from gateway.store import keys
from gateway.store.base import Store
from gateway.web.auth import (
    LINK_SEAL,
    SESSION_SEAL,
    BrowserSessions,
    Credentials,
    SignInLimiter,
    SignInLinks,
    client_address,
    digest,
    same,
)
from gateway.web.settings import WebSettings

ADMIN = "admin-token-0123456789abcdef"
CAROL = "carol-token-0123456789abcdef"
ALICE = "alice-token-0123456789abcdef"
SIGNER = EntrySigner(secrets.token_bytes(32))


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
    sessions = BrowserSessions(store, hours=1 / 3600, signer=SIGNER)  # one second
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
    other, _ = await BrowserSessions(store, hours=1, signer=SIGNER).create("chat", "alice")
    await BrowserSessions(store, hours=1, signer=SIGNER).end(other)
    assert await BrowserSessions(store, hours=1, signer=SIGNER).get(other, "chat") is None


async def test_sign_in_attempts_are_limited_per_address(store: Store) -> None:
    limiter = SignInLimiter(store, per_minute=3, area="/admin")
    assert [await limiter.allow("10.0.0.1") for _ in range(4)] == [True, True, True, False]
    assert await limiter.allow("10.0.0.2")


async def test_the_console_and_the_chat_count_sign_ins_apart(store: Store) -> None:
    console = SignInLimiter(store, per_minute=2, area="/admin")
    chat = SignInLimiter(store, per_minute=2, area="/chat")
    assert [await chat.allow("10.0.0.1") for _ in range(3)] == [True, True, False]
    # Someone guessing chat tokens from an address does not lock its operator out.
    assert [await console.allow("10.0.0.1") for _ in range(3)] == [True, True, False]


async def test_a_burst_across_a_minute_boundary_gets_no_fresh_allowance(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    limiter = SignInLimiter(store, per_minute=2, area="/admin")
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
    links = SignInLinks(store, hours=1, signer=SIGNER)
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


def _forged_session(name: str = "admin", kind: str = "operator") -> dict[str, object]:
    return {
        "kind": kind,
        "name": name,
        "csrf": "c" * 32,
        "expires": time.time() + 3600,
        "flash": "",
    }


async def test_a_session_written_into_the_store_by_anything_else_signs_nobody_in(
    store: Store,
) -> None:
    metrics = Metrics()
    signer = EntrySigner(secrets.token_bytes(32), metrics)
    sessions = BrowserSessions(store, hours=1, signer=signer)
    real, _ = await sessions.create("operator", "carol")
    sealed = await store.get(keys.web_session(digest(real)))
    forged = {
        # what the gateway wrote before sessions were sealed
        "plain": json.dumps(_forged_session()),
        # the sealed form with a made-up MAC
        "made-up mac": json.dumps({"v": _forged_session(), "mac": secrets.token_hex(32)}),
        # a real session's sealed value, copied under a cookie the forger knows
        "copied": sealed,
        # sealed by another gateway (another key)
        "other key": EntrySigner(secrets.token_bytes(32)).seal(
            SESSION_SEAL, keys.web_session(digest("other key")), _forged_session()
        ),
        # damaged: every console page failed with a 500 on these
        "not json": "{not json",
        "not an object": "[1, 2]",
        "empty": "",
    }
    for cookie, raw in forged.items():
        assert raw is not None
        await store.set(keys.web_session(digest(cookie)), raw)
        assert await sessions.get(cookie, "operator") is None, cookie
        assert await sessions.get(cookie, "chat") is None, cookie
    assert metrics.counter("approvals_tampered_total", kind=SESSION_SEAL) == len(forged)
    # Sealed by this gateway but not a session (the wrong shape): ignored and counted too.
    odd = keys.web_session(digest("odd"))
    await store.set(odd, signer.seal(SESSION_SEAL, odd, {"kind": "operator", "name": 1}))
    assert await sessions.get("odd", "operator") is None
    assert metrics.counter("approvals_tampered_total", kind=SESSION_SEAL) == len(forged) + 1
    # The real one still works.
    found = await sessions.get(real, "operator")
    assert found is not None and found.name == "carol"


async def test_a_sign_in_link_written_into_the_store_by_anything_else_is_refused(
    store: Store,
) -> None:
    metrics = Metrics()
    signer = EntrySigner(secrets.token_bytes(32), metrics)
    links = SignInLinks(store, hours=1, signer=signer)
    forged = {
        "plain": "admin",
        "made-up mac": json.dumps({"v": "admin", "mac": secrets.token_hex(32)}),
        "other key": EntrySigner(secrets.token_bytes(32)).seal(
            LINK_SEAL, keys.web_link(digest("other key")), "admin"
        ),
        "not a name": signer.seal(LINK_SEAL, keys.web_link(digest("not a name")), ["admin"]),
    }
    for code, raw in forged.items():
        await store.set(keys.web_link(digest(code)), raw)
        assert await links.redeem(code) is None, code
    assert metrics.counter("approvals_tampered_total", kind=LINK_SEAL) == len(forged)
    real = await links.create("erin")
    assert await links.redeem(real) == "erin"


async def test_a_count_that_is_not_a_number_does_not_break_sign_in(store: Store) -> None:
    limiter = SignInLimiter(store, per_minute=3, area="/chat")
    minute = int(time.time() // 60)
    for at in (minute - 1, minute, minute + 1):  # whichever minute the attempt lands in
        await store.set(keys.web_signin("/chat", "10.0.0.9", at), "not a number")
    # Entries the gateway did not write count as none: the full allowance, then the limit.
    assert [await limiter.allow("10.0.0.9") for _ in range(4)] == [True, True, True, False]
