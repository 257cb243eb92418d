"""`[browser]`: the headless browser tools (tools/web/browser/)."""

from __future__ import annotations

from pydantic import Field

from gateway.config.base import GB, HOUR, WEEK, Section


class BrowserSettings(Section):
    """Browser tools (tools/web/browser/): Chromium driven by Playwright, a context a session."""

    enabled: bool = True  # false: the browser tools are never offered
    # Empty: `chromium` (or chromium-browser, google-chrome) on PATH, else one Playwright installed.
    executable_path: str = ""
    headless: bool = True
    extra_args: list[str] = []  # more Chromium switches, after the built-in ones
    idle_seconds: float = Field(default=300.0, gt=0, le=WEEK)  # a session's context closes then
    # Open at once; the least recently used goes first.
    max_contexts: int = Field(default=4, ge=1, le=1000)
    # Ask a person before clicking or submitting something that looks like buy/pay/delete/send.
    approve_actions: bool = True
    navigation_timeout: float = Field(default=30.0, gt=0, le=HOUR)  # seconds for a page to load
    action_timeout: float = Field(default=10.0, gt=0, le=HOUR)  # a click, typing, a select
    max_snapshot_chars: int = Field(default=8000, ge=1000, le=10_000_000)  # shown to the model
    max_download_bytes: int = Field(default=50_000_000, ge=1, le=10 * GB)  # larger: deleted
