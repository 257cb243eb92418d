"""The browser tools the model calls: navigate, snapshot, click, type, select, scroll, back,
screenshot, close. Each acts on the chat session's own browser context and answers with the
page's URL, title, anything that happened meanwhile, and a fresh snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field

from gateway.sdk import ApprovalNeed, ToolContext, ToolError, ToolSpec, untrusted
from tools.args import ToolArgs
from tools.web.browser.actions import consequence, from_the_person
from tools.web.browser.guardproxy import REFUSED_HEADER
from tools.web.browser.manager import BrowserManager, BrowserSession
from tools.web.browser.snapshot import DESCRIBE_JS, REF_ATTR, ElementInfo, render, snapshot_script

if TYPE_CHECKING:
    from playwright.async_api import Locator, Page

GROUP = "browser"
SETTLE_SECONDS = 2.0  # at most this long waiting for the page to go quiet after an action
QUIET_SECONDS = 0.25  # no request open for this long counts as quiet
DOWNLOAD_WAIT = 5.0  # seconds a tool result waits for a download the action started
SCREENSHOTS_DIR = "screenshots"
NAVIGATION_WAIT_MS = 5000  # a navigation racing a snapshot gets this long to load


class NavigateArgs(ToolArgs):
    url: str = Field(description="The http:// or https:// URL to open.")


class SnapshotArgs(ToolArgs):
    offset: int = Field(default=0, ge=0, description="Where to continue a cut snapshot.")


class RefArgs(ToolArgs):
    ref: int = Field(ge=1, description="The element's number from the snapshot, [ref=N].")


class TypeArgs(RefArgs):
    text: str = Field(description="The text to put in the field (replaces what it holds).")
    submit: bool = Field(default=False, description="Press Enter afterwards (submits forms).")


class SelectArgs(RefArgs):
    value: str = Field(description="The option to choose, by its text or value.")


class ScrollArgs(ToolArgs):
    direction: Literal["down", "up"] = "down"
    pages: float = Field(default=1.0, gt=0, le=20, description="How many screen heights.")


class ScreenshotArgs(ToolArgs):
    full_page: bool = Field(default=False, description="The whole page, not only the screen.")


class NoArgs(ToolArgs):
    pass


class BrowserActions:
    """The browser tools' handlers on one manager (BrowserTools offers them when Chromium is
    installed and the browser is enabled)."""

    def __init__(self, manager: BrowserManager) -> None:
        self.manager = manager
        self.settings = manager.settings

    async def navigate(self, args: NavigateArgs, ctx: ToolContext) -> str:
        url = _http_url(args.url)
        parts = urlsplit(url)
        # Refuse before the browser sends anything; the proxy checks every later request too.
        await self.manager.guard.vet(
            parts.hostname or "", parts.port or _default_port(parts.scheme)
        )
        async with self.manager.use(ctx) as session:
            try:
                with _browser_errors(session):
                    response = await session.page.goto(url, wait_until="load")
            except ToolError:
                await _settle(session, self.settings.action_timeout)  # Chromium's error page
                raise
            await _settle(session, 0)
            lead = []
            if response is not None and await response.header_value(REFUSED_HEADER):
                lead.append("The guard refused to load this page (see the notes).")
            elif response is not None and response.status >= 400:
                lead.append(f"The server answered HTTP {response.status} {response.status_text}.")
            return await _report(session, self.settings.max_snapshot_chars, lead)

    async def snapshot(self, args: SnapshotArgs, ctx: ToolContext) -> str:
        async with self.manager.use(ctx, create=False) as session:
            return await _report(session, self.settings.max_snapshot_chars, [], offset=args.offset)

    async def click_approval(self, args: RefArgs, ctx: ToolContext) -> ApprovalNeed | None:
        return await _approval(self.manager, "browser_click", args.ref, ctx, submitting=False)

    async def click(self, args: RefArgs, ctx: ToolContext) -> str:
        async with self.manager.use(ctx, create=False) as session:
            element = await _element(session, args.ref)
            info = await _describe(element)
            # A confirm() that follows an approved (or unguarded) action is part of it.
            session.accept_dialogs = (
                not self.settings.approve_actions or consequence(info, submitting=False) is not None
            )
            try:
                with _browser_errors():
                    await element.click()
                await _settle(session, self.settings.action_timeout)
            finally:
                session.accept_dialogs = False
            return await _report(
                session, self.settings.max_snapshot_chars, [f"Clicked {_label(info)}."]
            )

    async def type_approval(self, args: TypeArgs, ctx: ToolContext) -> ApprovalNeed | None:
        if not args.submit:
            return None
        return await _approval(self.manager, "browser_type", args.ref, ctx, submitting=True)

    async def type_text(self, args: TypeArgs, ctx: ToolContext) -> str:
        async with self.manager.use(ctx, create=False) as session:
            element = await _element(session, args.ref)
            info = await _describe(element)
            if info.is_password and not from_the_person(args.text, ctx.user_text):
                raise ToolError(
                    "refused: a password field only takes a password the person wrote in "
                    "this message; ask them to send it, then type exactly what they sent."
                )
            with _browser_errors():
                await element.fill(args.text)
            typed = (
                f"Typed {len(args.text)} characters into {_label(info)}."
                if info.is_password
                else f"Typed {args.text[:200]!r} into {_label(info)}."
            )
            if args.submit:
                session.accept_dialogs = (
                    not self.settings.approve_actions
                    or consequence(info, submitting=True) is not None
                )
                try:
                    with _browser_errors():
                        await element.press("Enter")
                    await _settle(session, self.settings.action_timeout)
                finally:
                    session.accept_dialogs = False
                typed += " Pressed Enter."
            return await _report(session, self.settings.max_snapshot_chars, [typed])

    async def select(self, args: SelectArgs, ctx: ToolContext) -> str:
        async with self.manager.use(ctx, create=False) as session:
            element = await _element(session, args.ref)
            options: list[dict[str, str]] = await element.evaluate(
                "(el) => el.tagName === 'SELECT' ? [...el.options].map("
                "(o) => ({value: o.value, text: o.text.replace(/\\s+/g, ' ').trim()})) : null"
            )
            if options is None:
                raise ToolError(f"[ref={args.ref}] is not a drop-down list; use browser_click.")
            wanted = args.value.strip().casefold()
            chosen = next(
                (o for o in options if wanted in (o["text"].casefold(), o["value"].casefold())),
                None,
            )
            if chosen is None:
                names = ", ".join(repr(o["text"]) for o in options[:20])
                raise ToolError(f"no option {args.value!r} in that list; it has: {names}.")
            with _browser_errors():
                await element.select_option(value=chosen["value"])
            await _settle(session, self.settings.action_timeout)
            lead = [f"Selected {chosen['text']!r}."]
            return await _report(session, self.settings.max_snapshot_chars, lead)

    async def scroll(self, args: ScrollArgs, ctx: ToolContext) -> str:
        async with self.manager.use(ctx, create=False) as session:
            sign = 1 if args.direction == "down" else -1
            with _browser_errors():
                top, height, total = await session.page.evaluate(
                    "(f) => { window.scrollBy(0, window.innerHeight * f); return "
                    "[Math.round(scrollY), innerHeight, document.documentElement.scrollHeight]; }",
                    sign * args.pages,
                )
            await _settle(session, 0)
            lead = [f"Scrolled {args.direction}: showing {top:,}-{top + height:,} of {total:,} px."]
            return await _report(session, self.settings.max_snapshot_chars, lead)

    async def back(self, args: NoArgs, ctx: ToolContext) -> str:
        async with self.manager.use(ctx, create=False) as session:
            before = session.page.url
            with _browser_errors():
                await session.page.go_back(wait_until="load")
                if session.page.url == "about:blank" != before:  # the tab's empty start
                    await session.page.go_forward(wait_until="load")
            if session.page.url == before:
                raise ToolError("there is no earlier page in this tab.")
            await _settle(session, 0)
            return await _report(session, self.settings.max_snapshot_chars, ["Went back."])

    async def screenshot(self, args: ScreenshotArgs, ctx: ToolContext) -> str:
        async with self.manager.use(ctx, create=False) as session:
            with _browser_errors():
                data = await session.page.screenshot(full_page=args.full_page)
            stamp = time.strftime("%Y%m%d-%H%M%S")
            name = f"{SCREENSHOTS_DIR}/browser-{stamp}-{time.time_ns() // 1000 % 1000000:06d}.png"
            rel, _ = await asyncio.to_thread(session.workspace.write_bytes, name, data)
            return f"Saved a screenshot of {session.page.url} to {rel} ({len(data):,} bytes)."

    async def close_browser(self, args: NoArgs, ctx: ToolContext) -> str:
        if await self.manager.close_session(str(ctx.session)):
            return "Closed the browser for this chat (its cookies and pages are gone)."
        return "No browser was open for this chat."

    def specs(self) -> list[ToolSpec[Any]]:
        def spec(name: str, description: str, args: Any, handler: Any, **kw: Any) -> ToolSpec[Any]:
            # Pages are outside content: every tool that answers with one is marked. Links on a
            # page count as given, except after typing (a field would echo what the model typed).
            kw.setdefault("untrusted_output", True)
            kw.setdefault("page_links", name not in ("browser_type", "browser_select"))
            return ToolSpec(name, description, args, handler, GROUP, **kw)

        slow = self.settings.navigation_timeout + SETTLE_SECONDS + 5
        return [
            spec(
                "browser_navigate",
                "Open a web page in a real browser (runs JavaScript, keeps cookies for this chat) "
                "and return an outline of it in which each element you can use has a [ref=N].",
                NavigateArgs,
                self.navigate,
                timeout=slow,
                side_effects=untrusted.unseen_urls_check("browser_navigate", lambda a: [a.url]),
            ),
            spec(
                "browser_snapshot",
                "The outline of the current browser page with fresh [ref=N] numbers.",
                SnapshotArgs,
                self.snapshot,
            ),
            spec(
                "browser_click",
                "Click the element [ref=N] from the latest snapshot (link, button, checkbox...).",
                RefArgs,
                self.click,
                approval=self.click_approval,
                timeout=slow,
                side_effects=True,
            ),
            spec(
                "browser_type",
                "Type text into the field [ref=N], replacing its content; submit=true presses "
                "Enter.",
                TypeArgs,
                self.type_text,
                approval=self.type_approval,
                timeout=slow,
                side_effects=True,
            ),
            spec(
                "browser_select",
                "Choose an option of the drop-down list [ref=N] by its text or value.",
                SelectArgs,
                self.select,
                side_effects=True,
            ),
            spec(
                "browser_scroll",
                "Scroll the page up or down (loads content that appears on scrolling).",
                ScrollArgs,
                self.scroll,
            ),
            spec("browser_back", "Go back to the previous page.", NoArgs, self.back, timeout=slow),
            spec(
                "browser_screenshot",
                "Save a PNG screenshot of the current page in the workspace; returns its path.",
                ScreenshotArgs,
                self.screenshot,
            ),
            spec(
                "browser_close",
                "Close this chat's browser (pages, cookies and logins are dropped).",
                NoArgs,
                self.close_browser,
                untrusted_output=False,
                page_links=False,
            ),
        ]


async def _approval(
    manager: BrowserManager, tool: str, ref: int, ctx: ToolContext, *, submitting: bool
) -> ApprovalNeed | None:
    if not manager.settings.approve_actions or not manager.has_session(str(ctx.session)):
        return None
    async with manager.use(ctx, create=False) as session:
        info = await _describe(await _element(session, ref))
    word = consequence(info, submitting=submitting)
    if word is None:
        return None
    where = urlsplit(info.page_url)
    action = "press Enter in" if submitting else "click"
    summary = f"{action} {_label(info)} on {where.netloc}{where.path}"
    if (info.is_submit or submitting) and info.form_action:
        summary += f" (sends the form: {info.form_method} {info.form_action})"
    elif info.href:
        summary += f" (opens {info.href})"
    return ApprovalNeed(
        summary=summary,
        reason=f"the browser action looks like it would {word} something",
        # Exactly what was shown (page, element, where the form goes): approving "Delete"
        # on one page for the session does not approve another page's or form's.
        shape=summary,
    )


async def _element(session: BrowserSession, ref: int) -> Locator:
    locator = session.page.locator(f'[{REF_ATTR}="{ref}"]')
    with _browser_errors():
        found = await locator.count()
    if not found:
        raise ToolError(
            f"there is no element [ref={ref}] on the page now (a new page loaded or it changed); "
            "call browser_snapshot and use its numbers."
        )
    return locator.first


async def _describe(element: Locator) -> ElementInfo:
    with _browser_errors():
        data = await element.evaluate(DESCRIBE_JS)
    return ElementInfo.from_js(data)


def _label(info: ElementInfo) -> str:
    kind = "password field" if info.is_password else info.tag
    if info.tag == "a":
        kind = "link"
    elif info.tag == "input" and info.type in ("submit", "button", "image", "reset"):
        kind = "button"
    return f"{kind} {info.name[:80]!r}" if info.name else kind


async def _settle(session: BrowserSession, load_timeout: float) -> None:
    """Let what the action started finish: a navigation's load, then the network going
    quiet (bounded, since some pages never stop polling)."""
    from playwright.async_api import Error

    if load_timeout:
        with contextlib.suppress(Error):
            await session.page.wait_for_load_state("load", timeout=load_timeout * 1000)
    await session.quiet(QUIET_SECONDS, SETTLE_SECONDS)


async def _report(
    session: BrowserSession, max_chars: int, lead: list[str], *, offset: int = 0
) -> str:
    page = session.page
    if session.pending:
        await asyncio.wait(set(session.pending), timeout=DOWNLOAD_WAIT)
    await _refuse_other_schemes(session)
    data, title = await _outline(page)
    snap = render(list(data["lines"]), int(data["refs"]), max_chars, offset)
    head = [*lead, f"URL: {page.url}"]
    if title:
        head.append(f"Title: {' '.join(title.split())[:200]}")
    head += [f"Note: {note}" for note in session.take_notes()]
    return "\n".join(head) + "\n\n" + snap.text


async def _outline(page: Page) -> tuple[dict[str, Any], str]:
    """The snapshot data and title; a navigation that starts meanwhile (a script's redirect)
    destroys the page's context, so that is waited out and tried again."""
    from playwright.async_api import Error

    for attempt in range(3):
        try:
            with _browser_errors():
                data: dict[str, Any] = await page.evaluate(snapshot_script(), REF_ATTR)
                return data, await page.title()
        except ToolError as exc:
            if "context was destroyed" not in str(exc) or attempt == 2:
                raise
            with contextlib.suppress(Error):
                await page.wait_for_load_state("load", timeout=NAVIGATION_WAIT_MS)
    raise AssertionError("unreachable")


async def _refuse_other_schemes(session: BrowserSession) -> None:
    """Chromium already keeps web pages from opening file: or chrome: pages; this makes sure
    the tools never read one, whatever led there."""
    url = session.page.url
    scheme = url.split(":", 1)[0].lower()
    # chrome-error: Chromium's own page for a load that failed (it says why).
    if scheme in ("http", "https", "chrome-error") or url == "about:blank":
        return
    with _browser_errors():
        await session.page.goto("about:blank")
    raise ToolError(
        f"the page went to {url[:100]!r}; only http:// and https:// pages may be opened, so "
        "the tab was cleared."
    )


@contextlib.contextmanager
def _browser_errors(session: BrowserSession | None = None) -> Iterator[None]:
    """Playwright failures become one line the model can act on, with what the guard
    refused meanwhile (a refused https page fails as ERR_TUNNEL_CONNECTION_FAILED)."""
    from playwright.async_api import Error

    try:
        yield
    except Error as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # "Page.goto: net::ERR_NAME_NOT_RESOLVED at http://x/" -> keep the part after the call.
        text = text.split(": ", 1)[1] if text.split(": ", 1)[0].count(".") == 1 else text
        notes = session.take_notes() if session is not None else []
        why = "".join(f"; {note}" for note in notes)
        raise ToolError(f"the browser failed: {text[:300]}{why}") from None


def _http_url(url: str) -> str:
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolError(f"only http:// and https:// pages can be opened, not {url[:100]!r}.")
    if not parts.hostname:
        raise ToolError(f"{url[:100]!r} has no host name.")
    return url


def _default_port(scheme: str) -> int:
    return 443 if scheme.lower() == "https" else 80
