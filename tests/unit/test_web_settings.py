"""`[web]` and `[api]` settings: names and tokens checked, tokens never shown or logged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.app.app import load_settings
from gateway.config import ConfigError, masked
from gateway.runtime.secrets import secret_values

ADMIN = "admin-token-0123456789abcdef"
ALICE = "alice-token-0123456789abcdef"
KEY = "sk-team-1-0123456789abcdef"


def test_from_toml_and_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "chatgate.toml"
    config.write_text(f'[web]\nsession_hours = 2\n[web.chat_tokens]\n"{ALICE}" = "alice"\n')
    monkeypatch.setenv("CHATGATE_WEB__ADMIN_TOKEN", ADMIN)
    monkeypatch.setenv("CHATGATE_API__KEYS", json.dumps({KEY: "alice"}))
    monkeypatch.setenv("CHATGATE_API__APPROVAL_WAIT", "pending")
    settings = load_settings(config)
    web, api = settings.web, settings.api  # type: ignore[attr-defined]
    assert web.admin_token.get_secret_value() == ADMIN
    assert web.console_enabled and web.chat_enabled and web.session_hours == 2
    assert {t.get_secret_value(): n for t, n in web.chat_tokens.items()} == {ALICE: "alice"}
    assert {k.get_secret_value(): n for k, n in api.keys.items()} == {KEY: "alice"}
    assert api.approval_wait == "pending" and api.model == "chatgate"


def test_tokens_are_masked_in_config_show_and_known_to_the_log_filter() -> None:
    settings = load_settings(
        None,
        web={"admin_token": ADMIN, "chat_tokens": {ALICE: "alice"}},
        api={"keys": {KEY: "bob"}},
    )
    shown = json.dumps(masked(settings))
    assert ADMIN not in shown and ALICE not in shown and KEY not in shown
    assert '"alice"' in shown and '"bob"' in shown  # the user names stay readable
    assert {ADMIN, ALICE, KEY} <= set(secret_values(settings))


@pytest.mark.parametrize(
    ("web", "problem"),
    [
        ({"admin_token": "short"}, "at least 16 characters"),
        ({"operators": {"bad name": ADMIN}}, "operator 'bad name'"),
        ({"chat_tokens": {ALICE: "a:b"}}, "chat user 'a:b'"),
        ({"admin_token": ADMIN, "chat_tokens": {ADMIN: "alice"}}, "must be different"),
        ({"admin_token": ADMIN, "operators": {"admin": ALICE}}, "admin_token signs in as"),
        ({"public_url": "bot.example.com"}, "http:// or https://"),
    ],
)
def test_bad_web_settings_are_refused(web: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_settings(None, web=web)


def test_bad_api_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="at least 16 characters"):
        load_settings(None, api={"keys": {"sk-1": "bob"}})
    with pytest.raises(ConfigError, match="api user"):
        load_settings(None, api={"keys": {KEY: "bob smith"}})


def test_nothing_is_on_without_a_token() -> None:
    settings = load_settings(None)
    assert not settings.web.console_enabled and not settings.web.chat_enabled  # type: ignore[attr-defined]
    chat_only = load_settings(None, web={"chat_tokens": {ALICE: "alice"}})
    assert chat_only.web.chat_enabled and not chat_only.web.console_enabled  # type: ignore[attr-defined]


def test_api_model_names_need_their_profiles(tmp_path: Path) -> None:
    from gateway.app.app import App

    settings = load_settings(
        None, data_dir=tmp_path, http={"enabled": False}, api={"models": {"fast": "quick"}}
    )
    with pytest.raises(ConfigError, match=r"api\.models\.fast: there is no profile 'quick'"):
        App(settings)
    with pytest.raises(ConfigError, match=r"already api\.model"):
        load_settings(None, api={"models": {"chatgate": "quick"}})
