"""Signing in to the gateway's web pages: tokens, a rate limit, browser sessions, CSRF tokens.

Tokens are compared in constant time (their SHA-256 digests, so not even the length leaks).
A signed-in browser holds only a random session id in an HttpOnly, SameSite=Strict cookie;
the store keeps the session under the id's digest with its expiry, so any replica accepts
it and a store dump reveals no cookie. Sessions and sign-in links are sealed
(gateway/approvals/seals.py): one that a command wrote into the store itself signs nobody in.
Every change a page makes carries the session's CSRF token (a hidden form field or the
`X-CSRF-Token` header).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from aiohttp import web

from gateway.approvals.seals import EntrySigner
from gateway.store import keys
from gateway.store.base import Store
from gateway.web.settings import ADMIN, WebSettings

Kind = Literal["operator", "chat"]
SESSION_SEAL = "browser session"
LINK_SEAL = "sign-in link"
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
    """Sign-in attempts per client address over a sliding minute in one area (the console,
    the web chat), counted in the store (all replicas).

    Counts are kept per clock minute; the previous minute's count weighs in for the part of
    it still inside the last 60 seconds, so a burst across a minute boundary is not given a
    fresh allowance (a fixed window would allow twice the limit there).
    """

    def __init__(self, store: Store, per_minute: int, area: str) -> None:
        self._store = store
        self._limit = per_minute
        self._area = area  # each area its own allowance: chat sign-ins never lock out the console

    async def allow(self, client: str) -> bool:
        minute, into = divmod(time.time(), 60)
        key = keys.web_signin(self._area, client, int(minute))
        if _count(await self._store.get(key)) is None:
            await self._store.delete(key)  # not a count the gateway wrote: counting starts over
        count = await self._store.incr(key, ttl=120)
        if count > self._limit:
            return False
        before = await self._store.get(keys.web_signin(self._area, client, int(minute) - 1))
        return count + (_count(before) or 0) * (1 - into / 60) <= self._limit


def _count(raw: str | None) -> int | None:
    """A stored count (0 when there is none), or None when the entry is not a number."""
    if raw is None:
        return 0
    return int(raw) if raw.isascii() and raw.isdigit() else None


@dataclass
class BrowserSession:
    kind: Kind
    name: str
    csrf: str
    expires: float
    flash: str = ""  # one message for the next page (the outcome of a form)

    @classmethod
    def of(cls, value: Any) -> BrowserSession | None:
        """The session a sealed value holds, or None when it is not one (the wrong shape)."""
        if not isinstance(value, dict) or set(value) != _SESSION_FIELDS:
            return None
        kind, name, csrf, expires, flash = (value[f] for f in _SESSION_ORDER)
        texts = all(isinstance(t, str) for t in (name, csrf, flash))
        if kind not in ("operator", "chat") or not texts or not isinstance(expires, int | float):
            return None
        return cls(kind, name, csrf, float(expires), flash)


_SESSION_ORDER = ("kind", "name", "csrf", "expires", "flash")
_SESSION_FIELDS = set(_SESSION_ORDER)


class BrowserSessions:
    """Signed-in browsers, sealed in the store under their cookie's digest."""

    def __init__(self, store: Store, hours: float, signer: EntrySigner) -> None:
        self._store = store
        self._seconds = hours * 3600
        self._signer = signer

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
        """The signed-in session of this cookie. An entry the gateway did not seal there
        (written by anything else, damaged, not JSON) signs nobody in: it is logged and
        counted as tampering (gateway/approvals/seals.py) and the browser is asked to sign in."""
        if not cookie or len(cookie) > 100:
            return None
        key = keys.web_session(digest(cookie))
        value = self._signer.open(SESSION_SEAL, key, await self._store.get(key))
        if value is None:
            return None
        session = BrowserSession.of(value)
        if session is None:
            self._signer.report(SESSION_SEAL, key)
            return None
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
            key = keys.web_session(digest(cookie))
            await self._store.set(
                key, self._signer.seal(SESSION_SEAL, key, asdict(session)), ttl=ttl
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
    """One-time web chat sign-in links an operator hands out: `/chat/link/<code>`. The store
    keeps the code's digest with the user, sealed: a link written there by anything but the
    gateway signs nobody in."""

    def __init__(self, store: Store, hours: float, signer: EntrySigner) -> None:
        self._store = store
        self._seconds = hours * 3600
        self._signer = signer

    async def create(self, user: str) -> str:
        code = secrets.token_urlsafe(24)
        key = keys.web_link(digest(code))
        await self._store.set(key, self._signer.seal(LINK_SEAL, key, user), ttl=self._seconds)
        return code

    async def redeem(self, code: str) -> str | None:
        """The user the link signs in, once: of two browsers opening it, one gets in."""
        if not code or len(code) > 100:
            return None
        key = keys.web_link(digest(code))
        user = self._signer.open(LINK_SEAL, key, await self._store.get(key))
        if user is None:
            return None
        if not isinstance(user, str) or not user:
            self._signer.report(LINK_SEAL, key)
            return None
        if not await self._store.delete(key):
            return None
        return user
