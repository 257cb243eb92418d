"""One Chromium for the process and one browser context per chat session: started on first
use, each context closed when idle or when more than `max_contexts` are open (least recently
used first), and Chromium itself stopped when no context is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.sdk import BrowserSettings, ToolContext, ToolError
from tools.files.workspace import Workspace, WorkspaceFor
from tools.web.browser.chromium import Chromium, browser_env, launch_args
from tools.web.browser.guardproxy import Connector, GuardProxy, open_tcp
from tools.web.netguard import AddressGuard

if TYPE_CHECKING:
    from playwright.async_api import (
        Browser,
        BrowserContext,
        Dialog,
        Download,
        Page,
        Playwright,
    )

log = logging.getLogger(__name__)

VIEWPORT = {"width": 1280, "height": 900}
MAX_PAGES = 4  # tabs kept per session; popups beyond this close the oldest
DOWNLOADS_DIR = "downloads"


@dataclass
class BrowserSession:
    """One chat session's browser context: its current page, its proxy, and what happened in
    the background (downloads, dialogs, refused requests) since the last tool result."""

    key: str
    context: BrowserContext
    page: Page
    proxy: GuardProxy
    last_used: float
    # The workspace of the latest tool call (per chat or per person, tools.workspace_scope):
    # screenshots and downloads land there.
    workspace: Workspace
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # tool calls using it now; a busy session is never closed under them
    notes: list[str] = field(default_factory=list)
    # Set while a person-approved action runs: its confirm() dialogs are accepted.
    accept_dialogs: bool = False
    pending: set[asyncio.Task[None]] = field(default_factory=set)
    inflight: int = 0  # requests the pages have open now
    last_network: float = 0.0  # monotonic time of the last request start or end

    def network(self, delta: int) -> None:
        self.inflight = max(0, self.inflight + delta)
        self.last_network = time.monotonic()

    async def quiet(self, window: float, limit: float) -> None:
        """Wait until no request has been open for `window` seconds (counted from now at
        the earliest, so a request a script starts a moment later is caught), or `limit`."""
        started = time.monotonic()
        deadline = started + limit
        while time.monotonic() < deadline:
            quiet_since = max(self.last_network, started)
            if self.inflight == 0 and time.monotonic() - quiet_since >= window:
                return
            await asyncio.sleep(0.03)

    def take_notes(self, limit: int = 12) -> list[str]:
        """What happened since the last tool result, repeats folded, at most `limit` lines."""
        counts: dict[str, int] = {}
        for note in self.notes:
            counts[note] = counts.get(note, 0) + 1
        self.notes.clear()
        for refusal in self.proxy.take_refusals():
            if refusal.target.endswith("/favicon.ico"):  # Chromium's own, after a refused page
                continue
            note = f"blocked {refusal.target}: {refusal.reason}"
            counts[note] = counts.get(note, 0) + 1
        out = [note if n == 1 else f"{note} ({n} times)" for note, n in counts.items()]
        if len(out) > limit:
            out = [*out[: limit - 1], f"... and {len(out) - limit + 1} more"]
        return out

    async def downloads_settled(self) -> None:
        if self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)


class BrowserManager:
    def __init__(
        self,
        settings: BrowserSettings,
        chromium: Chromium,
        guard: AddressGuard,
        workspace_for: WorkspaceFor,
        *,
        connect: Connector = open_tcp,
        clock: Callable[[], float] = time.monotonic,
        secrets: Iterable[str] = (),
    ) -> None:
        self.settings = settings
        self._env = browser_env(settings, secrets)
        self.chromium = chromium
        self.guard = guard
        self._workspace_for = workspace_for
        self._connect = connect
        self._clock = clock
        self._sessions: OrderedDict[str, BrowserSession] = OrderedDict()
        self._closed: dict[str, str] = {}  # key -> why its context went, told once
        self._lock = asyncio.Lock()
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._browser_proxy: GuardProxy | None = None
        self._reaper: asyncio.Task[None] | None = None
        self.launches = 0

    @property
    def open_contexts(self) -> int:
        return len(self._sessions)

    @property
    def running(self) -> bool:
        return self._browser is not None

    @contextlib.asynccontextmanager
    async def use(self, ctx: ToolContext, *, create: bool = True) -> AsyncIterator[BrowserSession]:
        """The chat session's context, held for one tool call (created when `create`)."""
        workspace = self._workspace_for(ctx)
        session = await self._acquire(str(ctx.session), workspace, create)
        try:
            async with session.lock:
                session.workspace = workspace
                yield session
        finally:
            session.users -= 1
            session.last_used = self._clock()

    def has_session(self, key: str) -> bool:
        return key in self._sessions

    async def close_session(self, key: str) -> bool:
        async with self._lock:
            session = self._sessions.pop(key, None)
        if session is None:
            return False
        await self._dispose(session)
        await self._stop_if_unused()
        return True

    async def reap_idle(self) -> list[str]:
        """Close every context idle longer than `idle_seconds`; returns their keys."""
        now = self._clock()
        async with self._lock:
            idle = [
                s
                for s in self._sessions.values()
                if s.users == 0 and now - s.last_used >= self.settings.idle_seconds
            ]
            for session in idle:
                del self._sessions[session.key]
                self._remember_closed(
                    session.key,
                    f"the browser for this chat was closed after "
                    f"{self.settings.idle_seconds:g} s idle; this is a fresh one",
                )
        for session in idle:
            await self._dispose(session)
        await self._stop_if_unused()
        return [s.key for s in idle]

    async def close(self) -> None:
        """Close every context, Chromium and Playwright (the gateway is shutting down)."""
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        async with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for session in sessions:
            await self._dispose(session)
        async with self._lock:
            await self._stop_browser()

    # -- internals -------------------------------------------------------------------------

    async def _acquire(self, key: str, workspace: Workspace, create: bool) -> BrowserSession:
        async with self._lock:
            session = self._sessions.get(key)
            if session is not None and not session.page.is_closed():
                self._sessions.move_to_end(key)
                session.users += 1
                return session
            if session is not None:  # the page died (crash, page closed itself)
                del self._sessions[key]
                await self._dispose(session)
            if not create:
                why = self._closed.get(key)
                raise ToolError(
                    (f"{why.split(';')[0]}. " if why else "no page is open. ")
                    + "Open one with browser_navigate first."
                )
            await self._make_room()
            session = await self._new_session(key, workspace)
            why = self._closed.pop(key, None)
            if why:
                session.notes.append(why)
            self._sessions[key] = session
            session.users += 1
            self._start_reaper()
            return session

    async def _make_room(self) -> None:
        while len(self._sessions) >= self.settings.max_contexts:
            victim = next((s for s in self._sessions.values() if s.users == 0), None)
            if victim is None:
                raise ToolError(
                    f"all {self.settings.max_contexts} browser sessions are busy right now; "
                    "try again in a minute."
                )
            del self._sessions[victim.key]
            self._remember_closed(
                victim.key,
                "the browser for this chat was closed to make room for another chat; "
                "this is a fresh one",
            )
            log.info("browser context evicted session=%s", victim.key)
            await self._dispose(victim)

    def _remember_closed(self, key: str, why: str) -> None:
        self._closed.pop(key, None)
        self._closed[key] = why
        while len(self._closed) > 1000:  # only recent chats need the notice
            del self._closed[next(iter(self._closed))]

    async def _new_session(self, key: str, workspace: Workspace) -> BrowserSession:
        browser = await self._ensure_browser()
        proxy = GuardProxy(self.guard, connect=self._connect)
        await proxy.start()
        try:
            context = await browser.new_context(
                proxy={"server": proxy.url},
                accept_downloads=True,
                viewport=VIEWPORT,  # type: ignore[arg-type]
                service_workers="block",
            )
            context.set_default_timeout(self.settings.action_timeout * 1000)
            context.set_default_navigation_timeout(self.settings.navigation_timeout * 1000)
            page = await context.new_page()
        except BaseException:
            await proxy.stop()
            raise
        session = BrowserSession(key, context, page, proxy, self._clock(), workspace)
        context.on("request", lambda _: session.network(+1))
        context.on("requestfinished", lambda _: session.network(-1))
        context.on("requestfailed", lambda _: session.network(-1))
        self._watch(session, page)
        context.on("page", lambda popup: self._adopt(session, popup))
        log.info("browser context opened session=%s", key)
        return session

    def _watch(self, session: BrowserSession, page: Page) -> None:
        page.on("download", lambda download: self._on_download(session, download))
        page.on("dialog", lambda dialog: self._on_dialog(session, dialog))

    def _adopt(self, session: BrowserSession, popup: Page) -> None:
        """A new tab (target=_blank, window.open) becomes the page the tools act on."""
        if popup is session.page:
            return
        self._watch(session, popup)
        session.page = popup
        session.notes.append("the page opened a new tab; the tools now act on it")
        pages = session.context.pages
        if len(pages) > MAX_PAGES:
            self._spawn(session, pages[0].close())

    def _on_dialog(self, session: BrowserSession, dialog: Dialog) -> None:
        message = " ".join(dialog.message.split())[:200]
        if dialog.type == "alert" or dialog.type == "beforeunload":
            session.notes.append(f"the page showed a {dialog.type} dialog: {message!r}")
            self._spawn(session, dialog.accept())
        elif session.accept_dialogs and dialog.type == "confirm":
            session.notes.append(f"the page asked {message!r}; accepted (the action was approved)")
            self._spawn(session, dialog.accept())
        else:
            session.notes.append(f"the page asked {message!r} ({dialog.type}); it was dismissed")
            self._spawn(session, dialog.dismiss())

    def _on_download(self, session: BrowserSession, download: Download) -> None:
        self._spawn(session, self._save_download(session, download))

    async def _save_download(self, session: BrowserSession, download: Download) -> None:
        name = _safe_name(download.suggested_filename)
        limit = self.settings.max_download_bytes
        try:
            temporary = await download.path()  # Playwright's copy, deleted with the context
            size = temporary.stat().st_size
            if size > limit:
                session.notes.append(
                    f"a download of {name!r} ({size:,} bytes) was dropped: it is over the "
                    f"{limit:,}-byte limit"
                )
                return
            workspace = session.workspace
            rel = _unique(workspace, DOWNLOADS_DIR, name)
            rel, _ = await asyncio.to_thread(workspace.write_bytes, rel, temporary.read_bytes())
        except (ToolError, OSError) as exc:
            session.notes.append(f"a download of {name!r} could not be saved: {exc}")
            return
        except Exception as exc:  # Playwright: the download failed or was cancelled
            session.notes.append(f"a download of {name!r} failed: {exc}")
            return
        session.notes.append(f"downloaded {name!r} to {rel} ({size:,} bytes)")

    def _spawn(self, session: BrowserSession, work: object) -> None:
        async def run() -> None:
            try:
                await work  # type: ignore[misc]
            except Exception as exc:  # the page or context went away meanwhile
                log.debug("browser background work failed: %s", exc)

        task = asyncio.ensure_future(run())
        session.pending.add(task)
        task.add_done_callback(session.pending.discard)

    async def _ensure_browser(self) -> Browser:
        if self._browser is not None and self._browser.is_connected():
            return self._browser
        await self._stop_browser()
        from playwright.async_api import Error, async_playwright

        proxy = GuardProxy(None)
        await proxy.start()
        _driver_env_is(self._env)
        chromium_env: dict[str, str | float | bool] = dict(self._env)
        playwright = await async_playwright().start()
        try:
            # Every page lives in a context with its own proxy; the browser-wide one refuses
            # whatever Chromium would send by itself.
            browser = await playwright.chromium.launch(
                executable_path=self.chromium.path,
                headless=self.settings.headless,
                args=launch_args(self.settings),
                proxy={"server": proxy.url},
                timeout=self.settings.navigation_timeout * 1000,
                env=chromium_env,
            )
        except Error as exc:
            await playwright.stop()
            await proxy.stop()
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ToolError(
                f"the browser could not start ({first}); tell the operator to run "
                "`chatgate doctor`."
            ) from None
        self._playwright, self._browser, self._browser_proxy = playwright, browser, proxy
        self.launches += 1
        log.info("chromium started path=%s", self.chromium.path)
        return browser

    async def _stop_browser(self) -> None:
        browser, playwright, proxy = self._browser, self._playwright, self._browser_proxy
        self._browser = self._playwright = self._browser_proxy = None
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
            log.info("chromium stopped")
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        if proxy is not None:
            await proxy.stop()

    async def _stop_if_unused(self) -> None:
        async with self._lock:
            if not self._sessions:
                await self._stop_browser()

    async def _dispose(self, session: BrowserSession) -> None:
        for task in list(session.pending):
            task.cancel()
        with contextlib.suppress(Exception):
            await session.context.close()
        await session.proxy.stop()
        log.info("browser context closed session=%s", session.key)

    def _start_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap_forever())

    async def _reap_forever(self) -> None:
        interval = min(max(self.settings.idle_seconds / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap_idle()
            except Exception:
                log.exception("closing idle browser contexts failed")
            if not self._sessions:
                return


def _safe_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._- " else "_" for c in Path(name).name).strip()
    cleaned = cleaned.lstrip(".")
    return cleaned[:120] or "download"


def _unique(workspace: Workspace, folder: str, name: str) -> str:
    """`folder/name`, or `folder/name-2` and so on when that file exists."""
    try:
        taken = set(workspace.listdir(folder))
    except ToolError:  # the folder does not exist yet
        taken = set()
    stem, dot, suffix = name.rpartition(".")
    if not stem:
        stem, dot, suffix = name, "", ""
    candidate = name
    for n in range(2, 1000):
        if candidate not in taken:
            return f"{folder}/{candidate}"
        candidate = f"{stem}-{n}{dot}{suffix}"
    raise ToolError(f"too many downloads named {name}; clean up the {folder} folder.")


def _driver_env_is(env: Mapping[str, str]) -> None:
    """Make Playwright start its node driver with `env` (plus its own PW_* variables).

    Playwright has no option for the driver's environment: it copies this process's, tokens
    and keys included, where a command running as the same user could read them
    (/proc/<pid>/environ). Its helper that makes that copy is replaced instead; without the
    helper (another Playwright) the browser does not start rather than start with secrets.
    """
    transport = None
    for name in ("playwright._impl.transport", "playwright._impl._transport"):  # new, old
        with contextlib.suppress(ImportError):
            transport = importlib.import_module(name)
            break
    original = getattr(transport, "get_driver_env", None)
    if original is None:
        raise ToolError(
            "the browser cannot start: this Playwright version gives its driver the gateway's "
            "whole environment; tell the operator to install another Playwright version."
        )
    base = getattr(original, "__wrapped__", original)

    def clean() -> dict[str, str]:
        own = {k: v for k, v in base().items() if k.startswith("PW_")}
        return {**env, **own}

    clean.__wrapped__ = base  # type: ignore[attr-defined]
    setattr(transport, "get_driver_env", clean)  # noqa: B010 - not a public attribute
