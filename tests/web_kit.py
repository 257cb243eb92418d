"""A gateway with the web console, web chat and API on a real port, and a headless Chromium to
drive them: for the web tests and the README's screenshots (deploy/screenshots/screenshots.py)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.app.app import App
from gateway.config import BrowserSettings, Settings
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, UserRef
from tests.fakes.llm import ScriptedLLM
from tests.harness import configured_gateway, gateway_settings
from tools.files.workspaces import Workspaces
from tools.web.browser import find_chromium
from tools.web.browser.chromium import LAUNCH_ARGS

ADMIN_TOKEN = "admin-token-for-tests-0123456789"
OPERATOR_TOKEN = "operator-token-for-tests-98765"
ALICE_TOKEN = "alice-chat-token-for-tests-555"
API_KEY = "sk-test-bob-0123456789abcdef"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", *LAUNCH_ARGS]


def web_settings(
    tmp_path: Path, llm_url: str, *, redis_url: str = "", key_prefix: str = "", **sections: Any
) -> Settings:
    """Settings with an HTTP port of its own, an admin and an operator, alice in the web chat,
    bob on the API; sections merge in (as in tests.harness.gateway_settings)."""
    base: dict[str, Any] = {
        "http": {"enabled": True, "port": 0},
        "web": {
            "admin_token": ADMIN_TOKEN,
            "operators": {"carol": OPERATOR_TOKEN},
            "chat_tokens": {ALICE_TOKEN: "alice"},
        },
        "api": {"keys": {API_KEY: "bob"}},
    }
    for name, values in sections.items():
        if isinstance(values, dict) and isinstance(base.get(name), dict):
            base[name] = {**base[name], **values}
        else:
            base[name] = values
    return gateway_settings(tmp_path, llm_url, redis_url=redis_url, key_prefix=key_prefix, **base)


# The real App with its configured platforms (web, api) on a free port.
web_gateway = configured_gateway


def base_url(app: App) -> str:
    assert app.http is not None
    return f"http://127.0.0.1:{app.http.port}"


def web_chat(user: str, conversation: str) -> ChatRef:
    return ChatRef(platform="web", chat_id=user, thread_id=conversation, kind=ChatKind.DIRECT)


def web_message(user: str, conversation: str, text: str, event: str) -> Inbound:
    """A message as the web chat submits it (for tests that drive the console, not the chat)."""
    return Inbound(
        event_id=f"web:{user}:{event}",
        chat=web_chat(user, conversation),
        sender=UserRef(platform="web", user_id=user, display_name=user),
        text=text,
        mentioned=True,
        session=f"web:{user}:t{conversation}",
    )


@dataclass
class Browser:
    """One Chromium for a test module; each test takes fresh contexts (cookies) from it."""

    playwright: Any
    chromium: Any

    async def context(self, **options: Any) -> Any:
        return await self.chromium.new_context(**options)


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    from playwright.async_api import async_playwright

    found = find_chromium(BrowserSettings())
    playwright = await async_playwright().start()
    try:
        browser = await playwright.chromium.launch(
            executable_path=found.path, headless=True, args=CHROMIUM_FLAGS
        )
        try:
            yield Browser(playwright, browser)
        finally:
            await browser.close()
    finally:
        await playwright.stop()


async def sign_in(page: Any, url: str, token: str) -> None:
    """Fill the one password field of a sign-in page and submit it."""
    await page.goto(url)
    await page.fill("input[name=token]", token)
    await page.click("button[type=submit]")
    await page.wait_for_load_state()


@dataclass
class Site:
    """A test module's gateway, the scripted LLM behind it, and (for browser tests) Chromium."""

    app: App
    llm: ScriptedLLM
    url: str
    browser: Browser | None = None

    @property
    def chromium(self) -> Browser:
        assert self.browser is not None
        return self.browser


@contextlib.asynccontextmanager
async def running_site(tmp_path: Path, *, browser: bool, **sections: Any) -> AsyncIterator[Site]:
    async with contextlib.AsyncExitStack() as stack:
        llm = await stack.enter_async_context(ScriptedLLM())
        app = await stack.enter_async_context(
            web_gateway(web_settings(tmp_path, llm.url, **sections))
        )
        found = await stack.enter_async_context(chromium()) if browser else None
        yield Site(app, llm, base_url(app), found)


def build_dir(app: App, chat: ChatRef) -> Path:
    """A `build` folder with a file in it, in the workspace where the chat's commands run."""
    settings = app.settings
    folder = Workspaces(settings.workspace, settings.tools.workspace_scope).folder(chat)
    path = settings.workspace.joinpath(*folder, "build")
    path.mkdir(parents=True, exist_ok=True)
    (path / "out.o").write_text("object")
    return path


async def pending_id(app: App) -> str:
    """The id of the newest approval request, once one is made."""
    for _ in range(250):
        requests = await app.approvals.pending_requests()
        if requests:
            return requests[-1].id
        await asyncio.sleep(0.02)
    raise AssertionError("no approval request was made")
