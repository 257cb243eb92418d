"""The browser tools in a real Chromium against local pages: JavaScript, a login, a multi-step
shop, approvals, dialogs, downloads, and the SSRF guard (an internal server that must see
nothing). One browser is shared by the module; lifecycle tests start their own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from gateway.config import BrowserSettings
from gateway.sdk.tooling import ToolError
from tests.browser_kit import Tools, chat
from tests.fakes.web_pages import (
    PAGES_HOST,
    PRIVATE_HOST,
    InternalServer,
    PageSite,
    loopback_connector,
    page_resolver,
)
from tests.procs import alive, marker_switch, process_tree
from tools.files.workspace import Workspace, WorkspaceFor
from tools.web.browser import BrowserManager, ChromiumMissing, find_chromium
from tools.web.netguard import AddressGuard

try:
    CHROMIUM = find_chromium(BrowserSettings())
except ChromiumMissing as exc:  # tests/run.sh installs it; elsewhere say why nothing ran
    pytest.skip(f"browser tests need Chromium and Playwright: {exc}", allow_module_level=True)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@dataclass
class World:
    tools: Tools
    site: PageSite
    internal: InternalServer
    off_machine: list[str]  # addresses the proxy was asked to connect to beyond loopback
    workspace: Path


def _fixed(workspace: Workspace) -> WorkspaceFor:
    """One workspace for every chat (the tests do not exercise workspace scopes)."""
    return lambda ctx: workspace


def make_manager(workspace: Path, off_machine: list[str], **settings: Any) -> BrowserManager:
    return BrowserManager(
        BrowserSettings(**settings),
        CHROMIUM,
        AddressGuard([PAGES_HOST], resolver=page_resolver()),
        _fixed(Workspace(workspace)),
        connect=loopback_connector(off_machine),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    async with PageSite() as site, InternalServer() as internal:
        site.internal_port = internal.port
        workspace = tmp_path_factory.mktemp("workspace")
        off_machine: list[str] = []
        manager = make_manager(workspace, off_machine, max_contexts=8)
        try:
            yield World(Tools(manager), site, internal, off_machine, workspace)
        finally:
            await manager.close()


@pytest.fixture(autouse=True)
def nothing_reached_inside(world: World) -> Any:
    """Every test ends with the internal server untouched and no connection attempted
    beyond the loopback interface."""
    yield
    assert world.internal.hits == []
    assert world.off_machine == []


# -- pages, forms, flows ----------------------------------------------------------------------


async def test_javascript_page_and_a_click_that_loads_more(world: World) -> None:
    ctx, run = chat("js"), world.tools
    page = await run(ctx, "browser_navigate", url=f"{world.site.base}/js")
    assert f"URL: {world.site.base}/js\nTitle: JS page" in page
    assert '- heading "Rendered by JavaScript" [level=1]' in page
    assert '- button "Load more" [ref=1]' in page
    assert "first extra" not in page
    after = await run(ctx, "browser_click", ref=1)
    assert after.startswith("Clicked button 'Load more'.")
    assert "- text: first extra" in after and "- text: second extra" in after


async def test_login_with_the_persons_password_keeps_the_session(world: World) -> None:
    ctx = chat("login", user_text="please sign in as ana, my password is correct horse")
    run = world.tools
    page = await run(ctx, "browser_navigate", url=f"{world.site.base}/login")
    assert "- form -> POST /login" in page
    assert '  - textbox "User name" [ref=1]' in page
    assert '  - password "Password" [ref=2]' in page
    assert '  - button "Sign in" [ref=3]' in page
    assert "Typed 'ana'" in await run(ctx, "browser_type", ref=1, text="ana")
    refused = await run(ctx, "browser_type", ref=2, text="hunter2")
    assert refused.startswith("error: refused: a password field only takes a password")
    assert "POST /login" not in world.site.hits
    done = await run(ctx, "browser_type", ref=2, text="correct horse", submit=True)
    assert done.startswith("Typed 13 characters into password field 'Password'. Pressed Enter.")
    assert "correct horse" not in done
    assert f"URL: {world.site.base}/account" in done and "Signed in as ana" in done
    # The context keeps its cookie for this chat only.
    again = await run(ctx, "browser_navigate", url=f"{world.site.base}/account")
    assert "Signed in as ana" in again
    other = await run(chat("someone-else"), "browser_navigate", url=f"{world.site.base}/account")
    assert f"URL: {world.site.base}/login" in other


async def test_a_scheduled_prompt_cannot_type_a_password(world: World) -> None:
    ctx, run = chat("scheduled", user_text=""), world.tools
    await run(ctx, "browser_navigate", url=f"{world.site.base}/login")
    refused = await run(ctx, "browser_type", ref=2, text="correct horse")
    assert refused.startswith("error: refused: a password field")


async def test_multi_step_shop_with_select_checkbox_back_and_an_approved_purchase(
    world: World,
) -> None:
    ctx, run = chat("shop"), world.tools
    page = await run(ctx, "browser_navigate", url=f"{world.site.base}/shop")
    assert '- combobox "Size" [ref=1] value="Small" options: "Small", "Medium", "Large"' in page
    assert '- checkbox "Gift wrap" [ref=2]' in page
    missing = await run(ctx, "browser_select", ref=1, value="XXL")
    assert missing == "error: no option 'XXL' in that list; it has: 'Small', 'Medium', 'Large'."
    assert 'value="Large"' in await run(ctx, "browser_select", ref=1, value="large")
    assert '"Gift wrap" [ref=2] [checked]' in await run(ctx, "browser_click", ref=2)
    assert await world.tools.need(ctx, "browser_click", ref=3) is None  # "Next"
    step2 = await run(ctx, "browser_click", ref=3)
    assert "/shop/step2?size=l&gift=yes" in step2 and "Size l, with gift wrap." in step2
    back = await run(ctx, "browser_back")
    assert back.startswith("Went back.") and f"URL: {world.site.base}/shop\n" in back
    step2 = await run(ctx, "browser_click", ref=3)
    assert '- button "Buy now" [ref=2]' in step2
    await run(ctx, "browser_type", ref=1, text="Ana")
    need = await world.tools.need(ctx, "browser_click", ref=2)
    assert need is not None
    assert need.summary.startswith(f"click button 'Buy now' on {PAGES_HOST}:")
    assert f"(sends the form: POST {world.site.base}/shop/order)" in need.summary
    assert need.reason == "the browser action looks like it would buy something"
    enter = await world.tools.need(ctx, "browser_type", ref=1, text="Ana", submit=True)
    assert enter is not None and "press Enter in" in enter.summary
    assert world.site.orders == []
    done = await run(ctx, "browser_click", ref=2)
    assert "Order placed for Ana" in done
    assert world.site.orders == [{"size": "l", "name": "Ana"}]


async def test_approval_is_asked_only_for_consequential_actions(world: World) -> None:
    ctx, run = chat("items"), world.tools
    page = await run(ctx, "browser_navigate", url=f"{world.site.base}/items")
    assert '- button "Delete" [ref=1]' in page and '- button "Refresh" [ref=2]' in page
    delete = await world.tools.need(ctx, "browser_click", ref=1)
    assert delete is not None and "delete" in delete.reason
    # Approving it for the session covers exactly this button on this page and form.
    assert delete.shape == delete.summary
    assert (
        f"{PAGES_HOST}:{world.site.port}/items" in delete.shape and "/items/remove" in delete.shape
    )
    assert await world.tools.need(ctx, "browser_click", ref=2) is None
    assert await world.tools.need(ctx, "browser_click", ref=5) is None  # Download report
    stale = world.tools.need(ctx, "browser_click", ref=99)
    with pytest.raises(ToolError, match=r"no element \[ref=99\]"):
        await stale
    manager = world.tools.manager
    original = manager.settings
    manager.settings = original.model_copy(update={"approve_actions": False})
    try:
        assert await world.tools.need(ctx, "browser_click", ref=1) is None
    finally:
        manager.settings = original
    assert "POST /items/remove" not in world.site.hits


async def test_confirm_dialogs_are_accepted_only_for_an_approved_action(world: World) -> None:
    ctx, run = chat("dialogs"), world.tools
    await run(ctx, "browser_navigate", url=f"{world.site.base}/items")
    reset = await run(ctx, "browser_click", ref=4)  # "Reset view": no approval, so dismissed
    assert "Note: the page asked 'Reset the view?' (confirm); it was dismissed" in reset
    assert "- text: not reset" in reset
    assert await world.tools.need(ctx, "browser_click", ref=3) is not None  # "Delete all"
    emptied = await run(ctx, "browser_click", ref=3)  # the agent runs it only once approved
    assert "the page asked 'Really empty the trash?'; accepted (the action was approved)" in emptied
    assert "- text: emptied" in emptied
    assert "POST /items/empty" in world.site.hits


async def test_downloads_and_screenshots_land_in_the_workspace(world: World) -> None:
    ctx, run = chat("files"), world.tools
    await run(ctx, "browser_navigate", url=f"{world.site.base}/items")
    clicked = await run(ctx, "browser_click", ref=5)
    assert "Note: downloaded 'report.csv' to downloads/report.csv (8 bytes)" in clicked
    assert (world.workspace / "downloads" / "report.csv").read_bytes() == b"a,b\n1,2\n"
    shot = await run(ctx, "browser_screenshot")
    assert shot.startswith(f"Saved a screenshot of {world.site.base}/items to screenshots/")
    name = shot.split(" to ", 1)[1].split(" (", 1)[0]
    assert (world.workspace / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_websockets_to_an_allowed_host_go_through_the_guard(world: World) -> None:
    page = await world.tools(chat("ws"), "browser_navigate", url=f"{world.site.base}/ws-page")
    assert "- text: echo: ping" in page
    assert "GET /ws" in world.site.hits


async def test_long_snapshots_are_cut_and_continue(world: World) -> None:
    ctx, run = chat("long"), world.tools
    part = await run(ctx, "browser_navigate", url=f"{world.site.base}/many?n=400")
    refs: list[int] = []
    for _ in range(10):
        body = part.split("\n\n", 1)[1] if part.startswith("URL:") else part
        assert len(body) < 8000 + 200
        refs += [int(chunk.split("]", 1)[0]) for chunk in body.split("[ref=")[1:]]
        last = body.rsplit("\n", 1)[-1]
        if not last.startswith("[snapshot cut: "):
            break
        assert "of 400 elements shown; call browser_snapshot with offset=" in last
        offset = int(last.split("offset=", 1)[1].split(" ", 1)[0])
        part = await run(ctx, "browser_snapshot", offset=offset)
    assert refs == list(range(1, 401))  # every element once, in order, over several parts
    assert '- link "Page number 399" [ref=400] -> /p/399' in part


async def test_errors_the_model_can_act_on(world: World) -> None:
    ctx, run = chat("errors"), world.tools
    none_yet = await run(ctx, "browser_snapshot")
    assert none_yet == "error: no page is open. Open one with browser_navigate first."
    await run(ctx, "browser_navigate", url=f"{world.site.base}/shop")
    assert (await run(ctx, "browser_click", ref=42)).startswith(
        "error: there is no element [ref=42] on the page now"
    )
    assert (await run(ctx, "browser_select", ref=2, value="x")) == (
        "error: [ref=2] is not a drop-down list; use browser_click."
    )
    assert (await run(ctx, "browser_back")) == "error: there is no earlier page in this tab."
    assert (await run(ctx, "browser_close")).startswith("Closed the browser for this chat")
    assert (await run(ctx, "browser_close")) == "No browser was open for this chat."


# -- the SSRF guard -----------------------------------------------------------------------------


async def test_a_page_cannot_reach_internal_addresses(world: World) -> None:
    page = await world.tools(chat("attack"), "browser_navigate", url=f"{world.site.base}/attack")
    assert "Totally normal page" in page
    port = world.internal.port
    loopback = "refused: 127.0.0.1 is a loopback address"
    for blocked in (
        f"GET http://localhost:{port}/img.png: refused: localhost resolves to 127.0.0.1",
        f"GET http://[::1]:{port}/style.css: refused: ::1 is a loopback address",
        f"GET http://127.0.0.1:{port}/script.js: {loopback}",
        f"GET http://127.0.0.1:{port}/frame: {loopback}",  # the iframe's 2130706433 form
        f"CONNECT 127.0.0.1:{port}: {loopback}",  # the websocket
        f"POST http://127.0.0.1:{port}/beacon: {loopback}",
        f"GET http://127.0.0.1:{port}/fetch: {loopback}",
        f"GET http://{PRIVATE_HOST}/admin: refused: {PRIVATE_HOST} resolves to 10.0.0.7",
    ):
        assert f"Note: blocked {blocked}" in page
    (outcome,) = [line for line in page.splitlines() if line.startswith("- text: ")]
    assert sorted(outcome.removeprefix("- text: ").split()) == [
        "fetch-blocked",
        "private-blocked",
        "ws-blocked",
    ]


async def test_redirects_to_internal_or_private_addresses_are_blocked(world: World) -> None:
    ctx, run = chat("redirects"), world.tools
    port = world.internal.port
    inside = await run(ctx, "browser_navigate", url=f"{world.site.base}/redirect-internal")
    assert inside.startswith("The guard refused to load this page (see the notes).")
    assert f"URL: http://127.0.0.1:{port}/secret" in inside
    assert (
        f"Note: blocked GET http://127.0.0.1:{port}/secret: refused: 127.0.0.1 is a "
        "loopback address" in inside
    )
    private = await run(ctx, "browser_navigate", url=f"{world.site.base}/redirect-private")
    assert (
        f"Note: blocked GET http://{PRIVATE_HOST}/admin: refused: {PRIVATE_HOST} resolves to "
        "10.0.0.7, a private address" in private
    )


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("file:///etc/passwd", "only http:// and https:// pages can be opened"),
        ("chrome://version", "only http:// and https:// pages can be opened"),
        ("data:text/html,<h1>hi</h1>", "only http:// and https:// pages can be opened"),
        ("javascript:alert(1)", "only http:// and https:// pages can be opened"),
        ("http://127.0.0.1:{port}/", "127.0.0.1 is a loopback address"),
        ("http://localhost:{port}/", "localhost resolves to 127.0.0.1, a loopback address"),
        ("http://[::1]:{port}/", "::1 is a loopback address"),
        ("http://2130706433:{port}/", "is a loopback address"),
        ("http://169.254.169.254/latest/", "a cloud metadata address"),
        (f"http://{PRIVATE_HOST}/", "resolves to 10.0.0.7, a private address"),
    ],
)
async def test_navigate_refuses_before_the_browser_sends_anything(
    world: World, url: str, error: str
) -> None:
    out = await world.tools(
        chat("refusals"), "browser_navigate", url=url.format(port=world.internal.port)
    )
    assert out.startswith("error: ") and error in out


async def test_a_page_cannot_open_local_files(world: World) -> None:
    ctx, run = chat("files-scheme"), world.tools
    await run(ctx, "browser_navigate", url=f"{world.site.base}/file-link")
    for ref in (1, 2):
        out = await run(ctx, "browser_click", ref=ref)
        assert f"URL: {world.site.base}/file-link" in out
        assert "root:" not in out


# -- lifecycle ----------------------------------------------------------------------------------


async def _until(condition: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def test_idle_contexts_close_and_chromium_stops(world: World, tmp_path: Path) -> None:
    marker = marker_switch()
    manager = make_manager(tmp_path, world.off_machine, idle_seconds=0.3, extra_args=[marker])
    tools = Tools(manager)
    try:
        ctx = chat("idle")
        assert "Load more" in await tools(ctx, "browser_navigate", url=f"{world.site.base}/js")
        processes = process_tree(marker)
        assert len(processes) >= 2  # the browser and at least one renderer
        await _until(lambda: manager.open_contexts == 0 and not manager.running)
        await _until(lambda: not any(alive(pid) for pid in processes))
        gone = await tools(ctx, "browser_snapshot")
        assert gone.startswith("error: the browser for this chat was closed after 0.3 s idle.")
        fresh = await tools(ctx, "browser_navigate", url=f"{world.site.base}/js")
        assert (
            "Note: the browser for this chat was closed after 0.3 s idle; this is a fresh one"
            in fresh
        )
        assert manager.launches == 2
    finally:
        await manager.close()


async def test_least_recently_used_context_makes_room(world: World, tmp_path: Path) -> None:
    marker = marker_switch()
    manager = make_manager(tmp_path, world.off_machine, max_contexts=2, extra_args=[marker])
    tools = Tools(manager)
    try:
        for name in ("a", "b", "c"):
            await tools(chat(name), "browser_navigate", url=f"{world.site.base}/shop")
        assert manager.open_contexts == 2
        evicted = await tools(chat("a"), "browser_snapshot")
        assert evicted.startswith(
            "error: the browser for this chat was closed to make room for another chat."
        )
        assert "Choose a shirt" in await tools(chat("c"), "browser_snapshot")
        processes = process_tree(marker)
        assert len(processes) >= 2
    finally:
        await manager.close()
    # Shutdown leaves no Chromium process behind.
    assert not manager.running
    await _until(lambda: not any(alive(pid) for pid in processes))
    assert process_tree(marker) == []


async def test_a_refused_https_redirect_says_why(world: World) -> None:
    ctx, run = chat("https-redirect"), world.tools
    url = f"{world.site.base}/redirect-internal?scheme=https"
    failed = await run(ctx, "browser_navigate", url=url)
    assert failed.startswith("error: the browser failed: net::ERR_TUNNEL_CONNECTION_FAILED")
    assert f"blocked CONNECT 127.0.0.1:{world.internal.port}: refused: 127.0.0.1 is a " in failed
    after = await run(ctx, "browser_snapshot")  # Chromium's error page, not a refusal
    assert not after.startswith("error:")
