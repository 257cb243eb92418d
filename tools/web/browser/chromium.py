"""Which Chromium the browser tools drive, with which flags, and the doctor line that says so."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gateway.sdk import BrowserSettings
from tools.shell.terminal.env import safe_env

# Debian's package, other distributions' names, Google's build.
_ON_PATH = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = (
    "install Chromium (Debian/Ubuntu: `apt-get install chromium`) or set browser.executable_path"
)
# Without the background-networking switches Chromium phones home at start (updates, sync,
# field trials); on a closed network those connections are refused and slow every launch.
LAUNCH_ARGS = (
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--dns-prefetch-disable",
    # WebRTC may otherwise send UDP straight to any address, past the guard proxy.
    "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    # Autofill would send each form's field signatures to Google. Port 9 is on Chromium's
    # unsafe-port list, so nothing is sent at all (`--disable-features` cannot be used:
    # the last one given wins, and Playwright passes its own).
    "--autofill-server-url=http://127.0.0.1:9/",
)


@dataclass(frozen=True)
class Chromium:
    path: str
    source: str  # "browser.executable_path", "PATH" or "Playwright"


class ChromiumMissing(Exception):
    """No usable Chromium (or no Playwright); the message says how to get one."""


def find_chromium(settings: BrowserSettings) -> Chromium:
    """The Chromium to launch: the configured path, one on PATH, or one Playwright installed."""
    if importlib.util.find_spec("playwright") is None:
        raise ChromiumMissing(
            "the Python package playwright is not installed; "
            "install it with `pip install 'chatgate[browser]'`"
        )
    configured = settings.executable_path.strip()
    if configured:
        path = Path(configured).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ChromiumMissing(
                f"browser.executable_path {configured!r} is not an executable file; "
                f"fix it, or {INSTALL_HINT.split(' or ')[0]}"
            )
        return Chromium(str(path), "browser.executable_path")
    for name in _ON_PATH:
        found = shutil.which(name)
        if found:
            return Chromium(found, "PATH")
    installed = _playwright_chromium()
    if installed is not None:
        return Chromium(str(installed), "Playwright")
    raise ChromiumMissing(f"no Chromium found; {INSTALL_HINT}")


def _playwright_chromium() -> Path | None:
    """The newest Chromium that `playwright install chromium` put in its cache, if any."""
    root = Path(
        os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or Path.home() / ".cache" / "ms-playwright"
    )
    if not root.is_dir():
        return None
    candidates = sorted(root.glob("chromium-*/chrome-linux*/chrome"), reverse=True)
    return next((c for c in candidates if os.access(c, os.X_OK)), None)


# What a visible (headless = false) Chromium needs to reach the display, and where an
# installed Chromium may live.
_DISPLAY = ("DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "XAUTHORITY")
_PLAYWRIGHT = ("PLAYWRIGHT_BROWSERS_PATH",)


def browser_env(settings: BrowserSettings, secrets: Iterable[str] = ()) -> dict[str, str]:
    """The environment of the Playwright driver and Chromium: the commands' allowlist (never a
    CHATGATE_* variable or a configured secret), plus the display for a visible browser."""
    extra = _PLAYWRIGHT if settings.headless else (*_PLAYWRIGHT, *_DISPLAY)
    return safe_env(secrets, passthrough=extra)


def launch_args(settings: BrowserSettings) -> list[str]:
    return [*LAUNCH_ARGS, *settings.extra_args]


def describe(settings: BrowserSettings) -> tuple[bool, str, str]:
    """(ok, detail, fix) for `chatgate doctor`: which Chromium is used, or how to get one.

    The browser is optional, so "none installed" passes with a hint; a configured
    `executable_path` that does not work is a failure.
    """
    if not settings.enabled:
        return True, "browser tools disabled (browser.enabled = false)", ""
    try:
        chromium = find_chromium(settings)
    except ChromiumMissing as exc:
        ok = not settings.executable_path.strip()
        return ok, f"browser tools not offered: {exc}", "" if ok else INSTALL_HINT
    return True, f"{chromium.path} (from {chromium.source})", ""
