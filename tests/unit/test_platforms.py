"""Platforms as plugins: the registry, their settings sections under the same names as
always, an adapter whose SDK is missing reported with its install command, and the
console registered like the others."""

from __future__ import annotations

import importlib.util
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from adapters.registry import PLATFORMS, platform_name, plugin, plugins, settings_sections
from gateway.app.app import App, configured_platforms, load_settings
from gateway.app.cli import main
from gateway.config import ConfigError, Settings, named_sections
from gateway.config import load_settings as core_settings
from gateway.sdk.channels import Adapter, AdapterContext
from gateway.sdk.platforms import PlatformPlugin, PlatformUnavailable


def test_every_registered_platform_is_one_plugin_with_its_own_section() -> None:
    names = [p.name for p in plugins()]
    assert names == [
        "telegram",
        "slack",
        "discord",
        "email",
        "whatsapp",
        "teams",
        "mattermost",
        "matrix",
        "console",
        "web",
        "api",
    ]
    assert len(PLATFORMS) == len(names)  # one registration line each
    assert [platform_name(module) for module in PLATFORMS] == names
    for found in plugins():
        assert found.settings.__module__ == f"adapters.{found.name}.settings"
    # The core's own settings know no platform.
    assert not {"telegram", "slack", "discord"} & set(Settings.model_fields)
    with pytest.raises(ConfigError, match="telegram: unknown setting"):
        core_settings(None, telegram={"token": "1:x"})


def test_env_names_and_toml_sections_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "chatgate.toml"
    cfg.write_text('[slack]\nbot_token = "xoxb-1"\nsigning_secret = "s"\n')
    monkeypatch.setenv("CHATGATE_TELEGRAM__TOKEN", "123:abc")
    monkeypatch.setenv("CHATGATE_DISCORD__ALLOWED_GUILDS", '["42"]')
    settings = load_settings(cfg)
    assert plugin("telegram").section(settings).token.get_secret_value() == "123:abc"
    assert plugin("discord").section(settings).allowed_guilds == ["42"]
    assert [p.name for p in configured_platforms(settings)] == ["telegram", "slack"]
    with pytest.raises(ConfigError, match=r"slack\.app_token: .*Socket Mode"):
        load_settings(None, slack={"bot_token": "xoxb-1"})


class _Missing(BaseModel):
    token: str = ""


def _never(settings: _Missing, ctx: AdapterContext) -> Adapter:
    raise AssertionError("an adapter without its SDK must not be built")


MISSING = PlatformPlugin(
    name="pigeon",
    title="Pigeon Post",
    settings=_Missing,
    enabled=lambda s: bool(s.token),
    build=_never,
    requires=("chatgate_test_no_such_sdk",),
    extra="pigeon",
)


def test_a_platform_on_its_defaults_starts_nothing() -> None:
    """So `chatgate run` may leave out the section of a platform named nowhere."""
    for found in plugins():
        if found.runs_in_gateway:
            assert not found.enabled(found.settings()), found.name


def test_run_builds_the_sections_the_config_and_environment_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "chatgate.toml"
    cfg.write_text('data_dir = "/tmp/x"\n[slack]\nbot_token = "xoxb-1"\n')
    env = {"CHATGATE_TELEGRAM__TOKEN": "1:x", "chatgate_web__chat_token": "t", "CHATGATE_API": "{}"}
    names = named_sections(cfg, env)
    assert {"slack", "telegram", "web", "api", "data_dir"} <= names
    assert list(settings_sections(names)) == ["telegram", "slack", "web", "api"]
    assert list(settings_sections(named_sections(tmp_path / "absent.toml", {}))) == []


def test_run_still_checks_a_named_platforms_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "chatgate.toml"
    cfg.write_text('[llm]\nbase_url = "http://127.0.0.1:9/v1"\n[discord]\ntokn = "x"\n')
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CHATGATE_SLACK__BOT_TOKN", "xoxb-1")
    monkeypatch.setenv("CHATGATE_WHATSAP__ACCESS_TOKEN", "t")  # a platform named nowhere else
    assert main(["--config", str(cfg), "run"]) == 2
    err = capsys.readouterr().err
    assert "discord.tokn: unknown setting" in err
    assert "CHATGATE_SLACK__BOT_TOKN: no such setting; did you mean CHATGATE_SLACK__BOT_T" in err
    # Matched against every platform's names, as the other commands do.
    assert "did you mean CHATGATE_WHATSAPP__ACCESS_TOKEN?" in err


def test_a_platform_without_its_sdk_says_how_to_install_it() -> None:
    assert importlib.util.find_spec("chatgate_test_no_such_sdk") is None
    assert MISSING.missing() == ["chatgate_test_no_such_sdk"]
    with pytest.raises(PlatformUnavailable, match=r"pip install 'chatgate\[pigeon\]'"):
        MISSING.ensure_installed()
    # The installed platforms have their SDKs in this environment.
    assert all(p.missing() == [] for p in plugins())


async def test_the_console_is_a_plugin_like_the_others(tmp_path: Path) -> None:
    settings = load_settings(
        None, data_dir=tmp_path, http={"enabled": False}, console={"chat_id": "c9", "echo": False}
    )
    app = App(settings)
    console = app.add_terminal_adapter()
    assert console.chat.chat_id == "c9" and app.outbox.has("console")
    assert plugin("console").runs_in_gateway is False
    assert "console" not in [p.name for p in configured_platforms(settings)]
    await app.store.close()
    await app.llm.aclose()


def test_run_without_a_platform_names_every_way_to_add_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CHATGATE_HTTP__ENABLED", "false")
    monkeypatch.setenv("CHATGATE_LLM__BASE_URL", "http://127.0.0.1:9/v1")  # a model is set
    assert main(["run"]) == 2
    err = capsys.readouterr().err
    for var in (
        "CHATGATE_TELEGRAM__TOKEN",
        "CHATGATE_SLACK__BOT_TOKEN",
        "CHATGATE_DISCORD__TOKEN",
        "CHATGATE_MATTERMOST__URL and CHATGATE_MATTERMOST__TOKEN",
    ):
        assert var in err


def test_submit_is_declared_to_answer_with_a_submission() -> None:
    """Adapters read `.status` off what `submit` returns; the declared type says they may
    (mypy --strict checks each adapter against it)."""
    from gateway.approvals.seals import EntrySigner
    from gateway.intake.admission import Submission
    from gateway.runtime.http import HttpServer
    from gateway.runtime.metrics import Metrics
    from gateway.sdk.extensions import Extensions
    from gateway.store.base import Store

    only_for_typing = {
        "Submission": Submission,
        "HttpServer": HttpServer,
        "Metrics": Metrics,
        "Extensions": Extensions,
        "Store": Store,
        "EntrySigner": EntrySigner,
    }
    hints = typing.get_type_hints(AdapterContext, localns=only_for_typing)
    _arguments, awaited = typing.get_args(hints["submit"])
    assert typing.get_args(awaited) == (Submission,)
