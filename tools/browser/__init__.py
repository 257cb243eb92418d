"""Browser tools: Chromium through Playwright, one context per chat session, every request
through the SSRF guard. `install_browser_tools` is the one call the tool set makes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from gateway.config import Settings
from gateway.doctor import CheckResult
from gateway.secrets import secret_values
from gateway.tooling import ToolSpec
from tools.browser.chromium import Chromium, ChromiumMissing, describe, find_chromium
from tools.browser.manager import BrowserManager
from tools.netguard import AddressGuard
from tools.workspace import WorkspaceFor

__all__ = [
    "BrowserManager",
    "Chromium",
    "ChromiumMissing",
    "browser_tool_specs",
    "describe",
    "doctor_check",
    "find_chromium",
]


def browser_tool_specs(
    settings: Settings,
    guard: AddressGuard,
    workspace_for: WorkspaceFor,
    closers: list[Callable[[], Awaitable[None]]],
) -> list[ToolSpec[Any]]:
    """The browser tools, with the hook that closes Chromium on shutdown added to `closers`;
    none when the browser is disabled or Chromium or Playwright is not installed."""
    if not settings.browser.enabled:
        return []
    try:
        chromium = find_chromium(settings.browser)
    except ChromiumMissing:
        return []
    from tools.browser.tools import browser_tools

    manager = BrowserManager(
        settings.browser, chromium, guard, workspace_for, secrets=secret_values(settings)
    )
    closers.append(manager.close)
    return browser_tools(manager)


def doctor_check(settings: Settings) -> Callable[[httpx.AsyncClient], Awaitable[CheckResult]]:
    """`chatgate doctor`'s line for the browser: which Chromium is used, or how to get one."""

    async def check(http: httpx.AsyncClient) -> CheckResult:
        ok, detail, fix = describe(settings.browser)
        return CheckResult("browser", ok, detail, fix)

    return check
