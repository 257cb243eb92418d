"""The browser tools' logic that needs no browser: which actions need approval, where passwords
may come from, how snapshots are cut, and which Chromium is found."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import BrowserSettings, load_settings
from tools.web.browser.actions import consequence, from_the_person
from tools.web.browser.chromium import ChromiumMissing, describe, find_chromium
from tools.web.browser.snapshot import ElementInfo, render


def element(**fields: object) -> ElementInfo:
    base: dict[str, object] = {
        "tag": "button",
        "type": "",
        "name": "",
        "href": "",
        "is_submit": False,
        "is_password": False,
        "form_action": "",
        "form_method": "",
        "form_buttons": (),
        "page_url": "https://shop.example/cart",
    }
    base.update(fields)
    return ElementInfo(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "word"),
    [
        ({"name": "Buy now"}, "buy"),
        ({"name": "Place order"}, "order"),
        ({"name": "Pay €20"}, "pay"),
        ({"name": "Delete"}, "delete"),
        ({"name": "Send"}, "send"),
        ({"name": "Post comment"}, "post"),
        ({"name": "Publish"}, "publish"),
        (
            {"name": "Continue", "is_submit": True, "form_action": "https://x.test/checkout"},
            "checkout",
        ),
        (
            {"name": "OK", "is_submit": True, "form_action": "https://x.test/api/deleteAccount"},
            "delete",
        ),
        ({"tag": "a", "name": "Remove", "href": "https://x.test/items/1"}, "remove"),
        ({"tag": "a", "name": "Account", "href": "https://x.test/account/delete_all"}, "delete"),
    ],
)
def test_consequential_clicks(fields: dict[str, object], word: str) -> None:
    assert consequence(element(**fields), submitting=False) == word


@pytest.mark.parametrize(
    "fields",
    [
        {"name": "Next"},
        {"name": "Search"},
        {"name": "Sign in", "is_submit": True, "form_action": "https://x.test/login"},
        {"tag": "a", "name": "Blog posts", "href": "https://x.test/posts/"},
        # A form's target only counts when the click submits it.
        {"name": "Show password", "is_submit": False, "form_action": "https://x.test/delete"},
        # The host is no action: a shop called buy.example is not a purchase by itself.
        {"tag": "a", "name": "Home", "href": "https://buy.example/"},
    ],
)
def test_harmless_clicks(fields: dict[str, object]) -> None:
    assert consequence(element(**fields), submitting=False) is None


def test_enter_counts_the_forms_default_button_and_target() -> None:
    search = element(
        tag="input", name="Query", form_action="https://x.test/search", form_buttons=("Search",)
    )
    assert consequence(search, submitting=True) is None
    assert consequence(search, submitting=False) is None
    chat_box = element(tag="textarea", name="Send a message")
    assert consequence(chat_box, submitting=True) == "send"
    login = element(
        tag="input",
        name="Password",
        form_action="https://x.test/session",
        form_buttons=("Sign in", "Delete my account"),
    )
    assert consequence(login, submitting=True) is None  # only the first (default) button
    checkout = element(
        tag="input",
        name="Name",
        form_action="https://x.test/shop/order",
        form_buttons=("Continue",),
    )
    assert consequence(checkout, submitting=True) == "order"


def test_passwords_must_come_from_the_person() -> None:
    assert from_the_person("correct horse", "my password is correct horse, thanks")
    assert not from_the_person("hunter2", "my password is correct horse")
    assert not from_the_person("", "anything")
    assert not from_the_person("secret", "")


def test_render_cuts_at_lines_and_continues_from_the_offset() -> None:
    lines = [f'- link "Page {n}" [ref={n}] -> /p/{n}' for n in range(1, 101)]
    first = render(lines, 100, 1000)
    assert first.next_offset is not None
    body, note = first.text.rsplit("\n", 1)
    assert len(body) <= 1000 and body.endswith("-> /p/" + body.rsplit("/p/", 1)[1])
    shown = body.count("[ref=")
    assert note == (
        f"[snapshot cut: {shown} of 100 elements shown; call browser_snapshot with "
        f"offset={first.next_offset} for the rest]"
    )
    rest = render(lines, 100, 100_000, offset=first.next_offset)
    assert rest.next_offset is None
    assert rest.text.startswith(f'- link "Page {shown + 1}" [ref={shown + 1}]')
    assert rest.text.endswith("-> /p/100")
    assert render([], 0, 1000).text == "(the page shows nothing)"
    assert render(lines, 100, 1000, offset=10**9).text == "(nothing past this offset)"


def test_render_shows_at_least_one_line_even_if_it_is_long() -> None:
    snap = render(["x" * 5000, "y"], 0, 1000)
    assert snap.text.startswith("x" * 1000) and snap.next_offset == 5001


# -- which Chromium ---------------------------------------------------------------------------


def _fake_chromium(folder: Path, name: str = "chromium") -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_configured_path_wins_and_must_be_executable(tmp_path: Path) -> None:
    exe = _fake_chromium(tmp_path)
    found = find_chromium(BrowserSettings(executable_path=str(exe)))
    assert (found.path, found.source) == (str(exe), "browser.executable_path")
    with pytest.raises(ChromiumMissing, match="is not an executable file"):
        find_chromium(BrowserSettings(executable_path=str(tmp_path / "missing")))


def test_path_then_playwrights_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    cache = tmp_path / "ms-playwright"
    monkeypatch.setenv("PLAYWRIGHT_BROWSERS_PATH", str(cache))
    with pytest.raises(ChromiumMissing, match="no Chromium found; install Chromium"):
        find_chromium(BrowserSettings())
    # Optional: nothing installed passes with the hint; a wrong configured path fails.
    ok, detail, fix = describe(BrowserSettings())
    assert ok and detail.startswith("browser tools not offered: no Chromium found")
    assert "apt-get install chromium" in detail and fix == ""
    ok, detail, fix = describe(BrowserSettings(executable_path=str(tmp_path / "nope")))
    assert not ok and "is not an executable file" in detail and "apt-get" in fix
    installed = cache / "chromium-1200" / "chrome-linux"
    installed.mkdir(parents=True)
    _fake_chromium(installed, "chrome")
    assert find_chromium(BrowserSettings()).source == "Playwright"
    on_path = _fake_chromium(bin_dir, "chromium")
    assert find_chromium(BrowserSettings()).path == str(on_path)
    assert describe(BrowserSettings()) == (True, f"{on_path} (from PATH)", "")
    assert describe(BrowserSettings(enabled=False))[1].startswith("browser tools disabled")


def test_browser_settings_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_BROWSER__IDLE_SECONDS", "60")
    monkeypatch.setenv("CHATGATE_BROWSER__APPROVE_ACTIONS", "false")
    settings = load_settings(None)
    assert settings.browser.idle_seconds == 60 and not settings.browser.approve_actions
    assert settings.browser.max_contexts == 4
