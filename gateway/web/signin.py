"""The sign-in of one area of the web pages (the console at /admin, the chat at /chat): its page
with one password field, the form (rate-limited per address in this area alone), and the
session cookie it sets."""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web

from gateway.approvals.seals import EntrySigner
from gateway.store.base import Store
from gateway.web import auth
from gateway.web.auth import BrowserSession, Kind
from gateway.web.pages import Templates, page, redirect
from gateway.web.settings import WebSettings

log = logging.getLogger(__name__)

TOO_MANY = "Too many sign-in attempts; wait a minute and try again."


class SignIn:
    def __init__(
        self,
        *,
        root: str,
        kind: Kind,
        cookie: str,
        heading: str,
        owner: Callable[[str], str | None],
        store: Store,
        signer: EntrySigner,
        settings: WebSettings,
        templates: Templates,
    ) -> None:
        self.root = root
        self._kind: Kind = kind
        self._cookie = cookie
        self._heading = heading
        self._owner = owner  # who a token signs in, or None
        self._secure = settings.secure_cookies
        self._templates = templates
        self.sessions = auth.BrowserSessions(store, settings.session_hours, signer)
        self.limiter = auth.SignInLimiter(store, settings.signin_attempts_per_minute, root)
        self._proxies = settings.proxy_networks

    def client(self, request: web.Request) -> str:
        """The address the sign-in limit counts (see auth.client_address)."""
        return auth.client_address(request, self._proxies)

    def cookie_of(self, request: web.Request) -> str:
        return request.cookies.get(self._cookie, "")

    async def session(self, request: web.Request) -> BrowserSession | None:
        return await self.sessions.get(self.cookie_of(request), self._kind)

    async def form(self, request: web.Request) -> web.Response:
        """GET {root}/login: the page, or straight in when already signed in."""
        if await self.session(request) is not None:
            return redirect(self.root)
        return self.page("")

    def page(self, error: str, status: int = 200) -> web.Response:
        presign = auth.new_presign()
        html = self._templates.render(
            "login.html",
            title="Sign in",
            heading=self._heading,
            action=f"{self.root}/login",
            presign=presign,
            error=error,
            static=f"{self.root}/static",
        )
        response = page(html, status)
        auth.set_cookie(
            response,
            auth.PRESIGN_COOKIE,
            presign,
            path=f"{self.root}/login",
            seconds=3600,
            secure=self._secure,
        )
        return response

    async def submit(self, request: web.Request) -> web.Response:
        """POST {root}/login: one token in, a session cookie out."""
        data = await request.post()
        form = {k: v for k, v in data.items() if isinstance(v, str)}
        client = self.client(request)
        if not await self.limiter.allow(client):
            log.warning("sign-in rate limited area=%s client=%s", self.root, client)
            return self.page(TOO_MANY, 429)
        if not auth.presign_ok(request, form):
            return self.page("The sign-in form expired; please try again.", 400)
        name = self._owner(form.get("token", "").strip())
        if name is None:
            log.warning("sign-in refused area=%s client=%s", self.root, client)
            return self.page("That token is not valid.", 403)
        return await self.start(name, client)

    async def start(self, name: str, client: str) -> web.Response:
        """A new session for `name`, and the way in."""
        cookie, _ = await self.sessions.create(self._kind, name)
        log.info("signed in area=%s name=%s client=%s", self.root, name, client)
        response = redirect(self.root)
        auth.set_cookie(
            response,
            self._cookie,
            cookie,
            path=self.root,
            seconds=self.sessions.seconds,
            secure=self._secure,
        )
        response.del_cookie(auth.PRESIGN_COOKIE, path=f"{self.root}/login")
        return response

    async def end(self, request: web.Request) -> web.Response:
        await self.sessions.end(self.cookie_of(request))
        response = redirect(f"{self.root}/login")
        response.del_cookie(self._cookie, path=self.root)
        return response
