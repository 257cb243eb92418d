"""Signing in to the gateway's web pages: tokens, a rate limit, browser sessions, CSRF tokens.

Tokens are compared in constant time (their SHA-256 digests, so not even the length leaks).
A signed-in browser holds only a random session id in an HttpOnly, SameSite=Strict cookie;
the store keeps the session under the id's digest with its expiry, so any replica accepts
it and a store dump reveals no cookie. Every change a page makes carries the session's CSRF
token (a hidden form field or the `X-CSRF-Token` header).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from aiohttp import web

from gateway.store import keys
from gateway.store.base import Store
from gateway.web.settings import ADMIN, WebSettings

Kind = Literal["operator", "chat"]
CSRF_FIELD = "csrf"
CSRF_HEADER = "X-CSRF-Token"
# A form shown before sign-in carries this cookie's value too (double submit), so another
# site cannot sign a browser in to an account of its choosing.
PRESIGN_COOKIE = "chatgate_presign"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def same(a: str, b: str) -> bool:
    """Constant-time equality of two secrets of any length."""
    return hmac.compare_digest(digest(a).encode(), digest(b).encode())


class Credentials:
    """Who a token belongs to, from `[web]`: operators (console and chat) and chat people."""

    def __init__(self, settings: WebSettings) -> None:
        operators = [(t.get_secret_value(), name) for name, t in settings.operators.items()]
        admin = settings.admin_token.get_secret_value()
        if admin:
            operators.append((admin, ADMIN))
        self._operators = operators
        self._chat = [(t.get_secret_value(), name) for t, name in settings.chat_tokens.items()]

    def operator(self, token: str) -> str | None:
        """The operator this token signs in, or None."""
        return _match(token, self._operators)

    def chat_user(self, token: str) -> str | None:
        """The web chat user this token signs in (operators may chat too), or None."""
        return _match(token, self._chat) or _match(token, self._operators)


def _match(token: str, candidates: Iterable[tuple[str, str]]) -> str | None:
    found = None
    for secret, name in candidates:  # no early exit: every candidate costs the same
        if token and same(token, secret):
            found = name
    return found


class SignInLimiter:
    """Sign-in attempts per client address over a sliding minute, counted in the store (all
    replicas).

    Counts are kept per clock minute; the previous minute's count weighs in for the part of
    it still inside the last 60 seconds, so a burst across a minute boundary is not given a
    fresh allowance (a fixed window would allow twice the limit there).
    """

    def __init__(self, store: Store, per_minute: int) -> None:
        self._store = store
        self._limit = per_minute

    async def allow(self, client: str) -> bool:
        minute, into = divmod(time.time(), 60)
        count = await self._store.incr(keys.web_signin(client, int(minute)), ttl=120)
        if count > self._limit:
            return False
        before = await self._store.get(keys.web_signin(client, int(minute) - 1))
        return count + int(before or 0) * (1 - into / 60) <= self._limit


@dataclass
class BrowserSession:
    kind: Kind
    name: str
    csrf: str
    expires: float
    flash: str = ""  # one message for the next page (the outcome of a form)


class BrowserSessions:
    def __init__(self, store: Store, hours: float) -> None:
        self._store = store
        self._seconds = hours * 3600

    @property
    def seconds(self) -> int:
        return max(int(self._seconds), 1)

    async def create(self, kind: Kind, name: str) -> tuple[str, BrowserSession]:
        """A new session; returns the cookie value (never stored) and the session."""
        cookie = secrets.token_urlsafe(32)
        session = BrowserSession(kind, name, secrets.token_urlsafe(24), time.time() + self._seconds)
        await self._save(cookie, session)
        return cookie, session

    async def get(self, cookie: str | None, kind: Kind) -> BrowserSession | None:
        if not cookie or len(cookie) > 100:
            return None
        raw = await self._store.get(keys.web_session(digest(cookie)))
        if raw is None:
            return None
        session = BrowserSession(**json.loads(raw))
        if session.kind != kind or session.expires <= time.time():
            return None
        return session

    async def end(self, cookie: str | None) -> None:
        if cookie:
            await self._store.delete(keys.web_session(digest(cookie)))

    async def flash(self, cookie: str, session: BrowserSession, text: str) -> None:
        session.flash = text
        await self._save(cookie, session)

    async def take_flash(self, cookie: str, session: BrowserSession) -> str:
        text, session.flash = session.flash, ""
        if text:
            await self._save(cookie, session)
        return text

    async def _save(self, cookie: str, session: BrowserSession) -> None:
        ttl = session.expires - time.time()
        if ttl > 0:
            await self._store.set(
                keys.web_session(digest(cookie)), json.dumps(asdict(session)), ttl=ttl
            )


def csrf_ok(request: web.Request, session: BrowserSession, form: dict[str, str]) -> bool:
    sent = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD, "")
    return bool(sent) and same(sent, session.csrf)


def set_cookie(
    response: web.StreamResponse, name: str, value: str, *, path: str, seconds: int, secure: bool
) -> None:
    response.set_cookie(
        name,
        value,
        max_age=seconds,
        path=path,
        httponly=True,
        samesite="Strict",
        secure=secure,
    )


Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]


def client_address(request: web.Request, proxies: Networks = ()) -> str:
    """The address the sign-in limit counts. Behind trusted proxies it is the nearest address
    in X-Forwarded-For that is not one of them: each proxy appends the peer it saw, so the
    entries left of an untrusted one may be forged by the client and are never read."""
    peer = request.remote or "unknown"
    if not proxies or not _within(peer, proxies):
        return peer
    forwarded = ",".join(request.headers.getall("X-Forwarded-For", []))
    hops = [hop.strip() for hop in forwarded.split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _within(hop, proxies):
            return hop if _is_address(hop) else peer
    return peer


def _within(address: str, networks: Networks) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def new_presign() -> str:
    return secrets.token_urlsafe(18)


def presign_ok(request: web.Request, form: dict[str, str]) -> bool:
    cookie = request.cookies.get(PRESIGN_COOKIE, "")
    sent = form.get(CSRF_FIELD, "")
    return bool(cookie) and bool(sent) and same(cookie, sent)


class SignInLinks:
    """One-time web chat sign-in links an operator hands out: `/chat/link/<code>`."""

    def __init__(self, store: Store, hours: float) -> None:
        self._store = store
        self._seconds = hours * 3600

    async def create(self, user: str) -> str:
        code = secrets.token_urlsafe(24)
        await self._store.set(keys.web_link(digest(code)), user, ttl=self._seconds)
        return code

    async def redeem(self, code: str) -> str | None:
        """The user the link signs in, once: of two browsers opening it, one gets in."""
        if not code or len(code) > 100:
            return None
        key = keys.web_link(digest(code))
        user = await self._store.get(key)
        if user is None or not await self._store.delete(key):
            return None
        return user
