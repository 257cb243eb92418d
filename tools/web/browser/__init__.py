"""Browser tools: Chromium through Playwright, one context per chat session, every request
through the SSRF guard. `BrowserTools` is the family the tool set installs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx

from gateway.sdk import CheckResult, Settings, ToolFamily, ToolSpec, secret_values
from tools.files.workspace import WorkspaceFor
from tools.web.browser.chromium import Chromium, ChromiumMissing, describe, find_chromium
from tools.web.netguard import AddressGuard

if TYPE_CHECKING:
    from tools.web.browser.manager import BrowserManager
    from tools.web.browser.tools import BrowserActions

__all__ = [
    "BrowserManager",
    "BrowserTools",
    "Chromium",
    "ChromiumMissing",
    "describe",
    "doctor_check",
    "find_chromium",
]


def __getattr__(name: str) -> Any:
    # The manager (and its proxy) load only when the browser is enabled and found.
    if name == "BrowserManager":
        from tools.web.browser.manager import BrowserManager

        return BrowserManager
    raise AttributeError(name)


class BrowserTools(ToolFamily):
    """The browser tools; none when the browser is disabled or Chromium or Playwright is not
    installed (`chatgate doctor` says which). Chromium starts on first use and is closed here."""

    name = "browser"

    def __init__(
        self, settings: Settings, guard: AddressGuard, workspace_for: WorkspaceFor
    ) -> None:
        self.actions: BrowserActions | None = None
        if not settings.browser.enabled:
            return
        try:
            chromium = find_chromium(settings.browser)
        except ChromiumMissing:
            return
        from tools.web.browser.manager import BrowserManager
        from tools.web.browser.tools import BrowserActions

        self.actions = BrowserActions(
            BrowserManager(
                settings.browser, chromium, guard, workspace_for, secrets=secret_values(settings)
            )
        )

    def specs(self) -> list[ToolSpec[Any]]:
        return [] if self.actions is None else self.actions.specs()

    async def close(self) -> None:
        if self.actions is not None:
            await self.actions.manager.close()


def doctor_check(settings: Settings) -> Callable[[httpx.AsyncClient], Awaitable[CheckResult]]:
    """`chatgate doctor`'s line for the browser: which Chromium is used, or how to get one."""

    async def check(http: httpx.AsyncClient) -> CheckResult:
        ok, detail, fix = describe(settings.browser)
        return CheckResult("browser", ok, detail, fix)

    return check
