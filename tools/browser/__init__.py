"""Browser tools: Chromium through Playwright, one context per chat session, every request
through the SSRF guard. `install_browser_tools` is the one call the tool set makes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from gateway.config import Settings
from gateway.tooling import ToolSpec
from tools.browser.chromium import Chromium, ChromiumMissing, describe, find_chromium
from tools.browser.manager import BrowserManager
from tools.netguard import AddressGuard
from tools.workspace import Workspace

__all__ = [
    "BrowserManager",
    "Chromium",
    "ChromiumMissing",
    "browser_tool_specs",
    "describe",
    "find_chromium",
]


def browser_tool_specs(
    settings: Settings,
    guard: AddressGuard,
    workspace: Workspace,
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

    manager = BrowserManager(settings.browser, chromium, guard, workspace)
    closers.append(manager.close)
    return browser_tools(manager)
