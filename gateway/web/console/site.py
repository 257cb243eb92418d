"""The operator console's routes: sign-in, the pages and their live updates, and the forms.

Every page needs a signed-in operator (`web.admin_token` or `web.operators`); every form
carries the session's CSRF token and answers with a redirect and a one-line outcome. Pages
update themselves without reloading: `/admin/events` is a server-sent event stream that
re-reads the page's data every couple of seconds and sends the parts that changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from gateway.intake.commands import forget_chat, new_conversation
from gateway.runtime.secrets import secret_values
from gateway.scheduling.scheduler import JobError
from gateway.sdk.extensions import ChatFiles
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sessions.key import SessionKey
from gateway.sessions.queue import SessionQueue
from gateway.turn.memory import MemoryBook
from gateway.web import auth
from gateway.web.auth import BrowserSession
from gateway.web.console.errors import RecentErrors
from gateway.web.console.health import LLMHealth
from gateway.web.console.views import ConsoleParts, Views
from gateway.web.pages import (
    SECURITY_HEADERS,
    Streams,
    Templates,
    gone,
    leave,
    page,
    redirect,
    static_handler,
)
from gateway.web.settings import WebSettings, check_name
from gateway.web.signin import SignIn

log = logging.getLogger(__name__)

COOKIE = "chatgate_admin"
ROOT = "/admin"
LIVE_EVERY = 2.0  # seconds between re-reads for live updates
KEEPALIVE = 15.0


@dataclass(frozen=True)
class Page:
    title: str
    parts: tuple[str, ...]
    nav: str  # the menu entry it belongs to
    live: bool = True  # updated while open (re-read every LIVE_EVERY seconds)


PAGES = {
    "overview": Page("Overview", ("replicas", "adapters", "llm", "queue", "errors"), "overview"),
    "approvals": Page("Approvals", ("pending", "audit"), "approvals"),
    "access": Page("Access", ("pairing",), "access"),
    "scheduler": Page("Scheduler", ("jobs",), "scheduler"),
    "job": Page("Job", ("job",), "scheduler"),
    "conversations": Page("Conversations", ("chats",), "conversations"),
    "conversation": Page("Conversation", ("history",), "conversations"),
    "usage": Page("Usage", ("usage",), "usage"),
    "tools": Page("Skills and tools", ("tables",), "tools", live=False),
    "deadletters": Page("Dead letters", ("deadletters",), "deadletters"),
}
NAV = (
    ("overview", "Overview", ROOT),
    ("approvals", "Approvals", f"{ROOT}/approvals"),
    ("access", "Access", f"{ROOT}/access"),
    ("scheduler", "Scheduler", f"{ROOT}/scheduler"),
    ("conversations", "Conversations", f"{ROOT}/conversations"),
    ("usage", "Usage", f"{ROOT}/usage"),
    ("tools", "Tools", f"{ROOT}/tools"),
    ("deadletters", "Dead letters", f"{ROOT}/dead-letters"),
)


class AdminConsole:
    def __init__(
        self,
        parts: ConsoleParts,
        web_settings: WebSettings,
        *,
        queue: SessionQueue,
        memory: MemoryBook,
        files: ChatFiles | None = None,
    ) -> None:
        self._p = parts
        self._files = files  # the chats' workspace files, when each chat has its own
        self._web = web_settings
        self._queue = queue
        self._memory = memory
        self._templates = Templates()
        self._signin = SignIn(
            root=ROOT,
            kind="operator",
            cookie=COOKIE,
            heading="chatgate operator console",
            owner=auth.Credentials(web_settings).operator,
            store=parts.store,
            signer=parts.signer,
            settings=web_settings,
            templates=self._templates,
        )
        self._sessions = self._signin.sessions
        self._links = auth.SignInLinks(parts.store, web_settings.link_hours, parts.signer)
        self._errors = RecentErrors(parts.store, parts.instance_id, secret_values(parts.settings))
        self._health = LLMHealth(parts.settings.llm)
        self._views = Views(parts, self._errors, self._health)
        self._streams = Streams()

    def add_routes(self, http: Any) -> None:
        """Register on the gateway's HttpServer (before it starts)."""
        add = http.add_route
        add("GET", ROOT, self._overview)
        add("GET", f"{ROOT}/", self._overview)
        add("GET", f"{ROOT}/login", self._signin.form)
        add("POST", f"{ROOT}/login", self._signin.submit)
        add("POST", f"{ROOT}/logout", self._logout)
        add("GET", f"{ROOT}/approvals", self._simple("approvals"))
        add("POST", f"{ROOT}/approvals/{{id}}", self._decide)
        add("GET", f"{ROOT}/access", self._simple("access"))
        add("POST", f"{ROOT}/access", self._access_action)
        add("GET", f"{ROOT}/scheduler", self._simple("scheduler"))
        add("GET", f"{ROOT}/scheduler/{{id}}", self._job)
        add("POST", f"{ROOT}/scheduler/{{id}}", self._job_action)
        add("GET", f"{ROOT}/conversations", self._simple("conversations"))
        add("GET", f"{ROOT}/conversations/{{session}}", self._conversation)
        add("POST", f"{ROOT}/conversations/{{session}}", self._conversation_action)
        add("POST", f"{ROOT}/links", self._link)
        add("GET", f"{ROOT}/usage", self._simple("usage"))
        add("GET", f"{ROOT}/tools", self._simple("tools"))
        add("GET", f"{ROOT}/dead-letters", self._simple("deadletters"))
        add("GET", f"{ROOT}/events", self._events)
        add("GET", f"{ROOT}/static/{{name}}", static_handler(()))

    async def start(self) -> None:
        self._errors.start()

    async def stop(self) -> None:
        await self._streams.close()
        await self._errors.stop()
        await self._health.close()

    # -- signing in -------------------------------------------------------------------------

    async def _signed_in(self, request: web.Request) -> tuple[BrowserSession | None, str]:
        return await self._signin.session(request), self._signin.cookie_of(request)

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        await self._change(request)
        return await self._signin.end(request)

    async def _change(self, request: web.Request) -> tuple[BrowserSession, str, dict[str, str]]:
        """A form that changes something: signed in, and the session's CSRF token with it."""
        session, cookie = await self._signed_in(request)
        if session is None:
            raise leave(f"{ROOT}/login")
        form = await _form(request)
        if not auth.csrf_ok(request, session, form):
            log.warning("console form refused without a valid CSRF token operator=%s", session.name)
            raise web.HTTPForbidden(
                text="This form has expired or did not come from the console; reload the page.",
                headers=SECURITY_HEADERS,
            )
        return session, cookie, form

    async def _done(
        self, cookie: str, session: BrowserSession, text: str, back: str
    ) -> web.Response:
        """Back to the page the form was on, with the outcome shown there once."""
        await self._sessions.flash(cookie, session, text)
        return redirect(back if back.startswith(ROOT) and "//" not in back else ROOT)

    # -- pages --------------------------------------------------------------------------------

    def _simple(self, name: str) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await self._page(request, name)

        return handler

    async def _overview(self, request: web.Request) -> web.StreamResponse:
        return await self._page(request, "overview")

    async def _job(self, request: web.Request) -> web.StreamResponse:
        return await self._page(request, "job", request.match_info["id"])

    async def _conversation(self, request: web.Request) -> web.StreamResponse:
        return await self._page(request, "conversation", request.match_info["session"])

    async def _page(self, request: web.Request, name: str, key: str = "") -> web.StreamResponse:
        session, cookie = await self._signed_in(request)
        if session is None:
            return redirect(f"{ROOT}/login")
        query = dict(request.query)
        if key:
            query["key"] = key
        context = await self._context(name, session, query, request.path_qs)
        parts = {p: self._templates.markup(f"parts/{p}.html", **context) for p in PAGES[name].parts}
        live = urlencode({**query, "page": name, "here": request.path_qs})
        html = self._templates.render(
            "console.html",
            parts=parts,
            flash=await self._sessions.take_flash(cookie, session),
            events=f"{ROOT}/events?{live}" if PAGES[name].live else "",
            **context,
        )
        return page(html)

    async def _context(
        self, name: str, session: BrowserSession, query: dict[str, str], here: str
    ) -> dict[str, Any]:
        return {
            **await self._views.data(name, query),
            "title": PAGES[name].title,
            "page": name,
            "nav": NAV,
            "current": PAGES[name].nav,
            "operator": session.name,
            "csrf": session.csrf,
            "here": here,
            "root": ROOT,
            "static": f"{ROOT}/static",
            "quote": lambda text: quote(str(text), safe=""),
            "chat_links": self._web.chat_enabled,
            "chat_files": self._files is not None,
        }

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the page's parts again whenever they change."""
        session, cookie = await self._signed_in(request)
        if session is None:
            raise web.HTTPUnauthorized(headers=SECURITY_HEADERS)
        query = dict(request.query)
        name = query.pop("page", "")
        if name not in PAGES:
            raise web.HTTPBadRequest(text="unknown page", headers=SECURITY_HEADERS)
        response = web.StreamResponse(
            headers={
                **SECURITY_HEADERS,
                "Content-Type": "text/event-stream",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        sent: dict[str, str] = {}
        quiet = 0.0
        here = query.pop("here", ROOT)
        with (
            self._streams.track(),
            contextlib.suppress(ConnectionResetError, asyncio.CancelledError),
        ):
            while not gone(request):
                current = await self._sessions.get(cookie, "operator")
                if current is None:
                    await response.write(_event("signedout", {}))
                    break
                context = await self._context(name, current, query, here)
                wrote = False
                for part in PAGES[name].parts:
                    html = self._templates.render(f"parts/{part}.html", **context)
                    if sent.get(part) != html:
                        sent[part] = html
                        await response.write(_event("part", {"name": part, "html": html}))
                        wrote = True
                quiet = 0.0 if wrote else quiet + LIVE_EVERY
                if quiet >= KEEPALIVE:  # keeps proxies from timing the stream out
                    await response.write(b": keepalive\n\n")
                    quiet = 0.0
                await asyncio.sleep(LIVE_EVERY)
        return response

    # -- forms --------------------------------------------------------------------------------

    async def _decide(self, request: web.Request) -> web.StreamResponse:
        session, cookie, form = await self._change(request)
        request_id = request.match_info["id"]
        choice = form.get("choice", "")
        operator = _operator(session)
        decided, text = await self._p.approvals.decide_as_operator(
            request_id,
            operator,
            choice,  # type: ignore[arg-type]  # checked by the service
            form.get("reason", ""),
        )
        if decided:
            log.info("console decision id=%s choice=%s by=%s", request_id, choice, operator.address)
        return await self._done(cookie, session, f"{request_id}: {text}", form.get("back", ""))

    async def _access_action(self, request: web.Request) -> web.StreamResponse:
        """Pairing from the console: approve or deny a code, revoke a grant."""
        session, cookie, form = await self._change(request)
        action = form.get("action", "")
        operator = _operator(session)
        pairing = self._p.pairing
        if action in ("approve", "deny"):
            text = await pairing.decide(form.get("code", ""), action == "approve", operator)
        elif action == "revoke":
            text = await pairing.revoke(form.get("user", ""), operator)
        else:
            text = "Unknown action."
        log.info("console access action=%s by=%s", action, operator.address)
        return await self._done(cookie, session, text, form.get("back", ""))

    async def _job_action(self, request: web.Request) -> web.StreamResponse:
        session, cookie, form = await self._change(request)
        job_id = request.match_info["id"]
        action = form.get("action", "")
        scheduler = self._p.scheduler
        operator = _operator(session)
        spec = await scheduler.book.get(job_id)
        back = form.get("back", "")
        if spec is None:
            return await self._done(cookie, session, f"There is no job {job_id} any more.", back)
        try:
            if action == "pause":
                await scheduler.pause(job_id, user=operator, chat=spec.target)
                text = f"Job {job_id} paused."
            elif action == "resume":
                await scheduler.resume(job_id, user=operator, chat=spec.target)
                text = f"Job {job_id} resumed."
            elif action == "run":
                await scheduler.run_now(job_id, user=operator)
                text = f"Job {job_id} is running now; its run shows in the history."
            elif action == "remove":
                await scheduler.remove(job_id, user=operator, chat=spec.target)
                text = f"Job {job_id} removed."
                back = f"{ROOT}/scheduler"
            else:
                text = "Unknown action."
        except JobError as exc:
            text = f"Job {job_id}: {exc}."
        log.info("console job action job=%s action=%s by=%s", job_id, action, operator.address)
        return await self._done(cookie, session, text, back)

    async def _conversation_action(self, request: web.Request) -> web.StreamResponse:
        session, cookie, form = await self._change(request)
        name = request.match_info["session"]
        action = form.get("action", "")
        back = form.get("back", "")
        if name.count(":") < 1:
            return await self._done(cookie, session, f"{name!r} is not a conversation.", back)
        key = SessionKey.parse(name)
        sessions = self._p.sessions
        if action == "new":
            stopped = await new_conversation(self._queue, sessions, key)
            note = " (its running request was stopped)" if stopped.running_here else ""
            text = f"Started a new conversation in {key}{note}."
        elif action == "forget":
            chat = ChatRef(platform=key.platform, chat_id=key.chat_id, thread_id=key.thread_id)
            user = UserRef(platform=key.platform, user_id=key.user_id or "-")
            cleared = await forget_chat(self._queue, sessions, self._memory, key, chat, user)
            text = (
                f"Forgot {key.chat_scope}: {max(cleared, 1)} conversation(s) and the chat's "
                "notes were deleted."
            )
            files = self._files
            if files is not None and (held := files.held(chat)) is not None:
                if form.get("files") == "1":
                    text += " " + await asyncio.to_thread(files.wipe, chat)
                else:
                    text += f" Its workspace files ({held}) were kept."
            back = f"{ROOT}/conversations"
        else:
            text = "Unknown action."
        log.info("console conversation session=%s action=%s by=%s", key, action, session.name)
        return await self._done(cookie, session, text, back)

    async def _link(self, request: web.Request) -> web.StreamResponse:
        session, cookie, form = await self._change(request)
        back = form.get("back", "")
        if not self._web.chat_enabled:
            return await self._done(
                cookie, session, "The web chat is off (web.chat = false).", back
            )
        user = form.get("user", "").strip()
        try:
            check_name(user, "user")
        except ValueError as exc:
            return await self._done(cookie, session, str(exc), back)
        code = await self._links.create(user)
        base = self._web.public_url or f"{request.scheme}://{request.host}"
        log.info("console sign-in link made user=%s by=%s", user, session.name)
        return await self._done(
            cookie,
            session,
            f"Sign-in link for web:{user}, usable once within {self._web.link_hours:g} h: "
            f"{base}/chat/link/{code}",
            back,
        )


def _operator(session: BrowserSession) -> UserRef:
    return UserRef(platform="web", user_id=session.name, display_name=session.name)


async def _form(request: web.Request) -> dict[str, str]:
    if request.content_type not in ("application/x-www-form-urlencoded", "multipart/form-data"):
        return {}
    data = await request.post()
    return {k: v for k, v in data.items() if isinstance(v, str)}


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
