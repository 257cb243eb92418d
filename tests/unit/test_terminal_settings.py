"""tools.terminal settings and the default workspace location (no longer inside data_dir)."""

from pathlib import Path

import pytest

from gateway.config import ConfigError, Settings, load_settings
from tools.shell.terminal.factory import hidden_paths
from tools.shell.tool import gateway_paths


def test_default_workspace_is_beside_the_data_dir_not_inside(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "state")
    assert settings.workspace == (tmp_path / "state-workspace").resolve()
    assert not settings.workspace.is_relative_to(settings.data_dir.resolve())


def test_explicit_workspace_is_kept(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "state", tools={"workspace": tmp_path / "ws"})
    assert settings.workspace == (tmp_path / "ws").resolve()


def test_terminal_defaults() -> None:
    term = Settings().tools.terminal
    assert term.backend == "sandbox" and term.network is False
    assert term.allow_unsandboxed is False and term.local.user == ""
    assert term.sandbox.user == "nobody" and term.ssh.port == 22


def test_terminal_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_TOOLS__TERMINAL__BACKEND", "ssh")
    monkeypatch.setenv("CHATGATE_TOOLS__TERMINAL__SSH__HOST", "build-host")
    monkeypatch.setenv("CHATGATE_TOOLS__SHELL_TIMEOUT", "12")
    settings = load_settings()
    assert settings.tools.terminal.backend == "ssh"
    assert settings.tools.terminal.ssh.host == "build-host"
    assert settings.tools.shell_timeout == 12


def test_ssh_needs_a_host(tmp_path: Path) -> None:
    cfg = tmp_path / "chatgate.toml"
    cfg.write_text('[tools.terminal]\nbackend = "ssh"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert err.value.problems == [
        "tools.terminal: Value error, backend 'ssh' needs tools.terminal.ssh.host"
    ]


def test_unknown_backend_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "chatgate.toml"
    cfg.write_text('[tools.terminal]\nbackend = "chroot"\n')
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    assert err.value.problems[0].startswith("tools.terminal.backend:")


def test_sandbox_hides_data_home_config_and_its_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "state")
    monkeypatch.setenv("CHATGATE_CONFIG", "/etc/chatgate/chatgate.toml")
    hidden = hidden_paths(settings)
    assert (tmp_path / "state").resolve() in hidden and Path.home().resolve() in hidden
    assert Path("/etc/chatgate/chatgate.toml") in hidden and Path("/etc/chatgate") in hidden
    monkeypatch.setenv("CHATGATE_CONFIG", "/etc/chatgate.toml")
    hidden = hidden_paths(settings)
    assert Path("/etc/chatgate.toml") in hidden and Path("/etc") not in hidden


def test_the_config_given_on_the_command_line_is_hidden_and_protected(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 30 finding 3: `--config FILE` alone (no CHATGATE_CONFIG) was not known here."""
    monkeypatch.delenv("CHATGATE_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    etc = tmp_path / "etc" / "chatgate"
    etc.mkdir(parents=True)
    config = etc / "chatgate.toml"
    config.write_text(f'data_dir = "{tmp_path / "state"}"\n')
    (etc / ".env").mkdir()  # a directory of that name is not an env file
    settings = load_settings(str(config))
    hidden = hidden_paths(settings)
    assert {config, etc, etc / "env", etc / "chatgate.env"} <= set(hidden)
    assert etc / ".env" not in hidden
    places = {path: label for path, label, secret in gateway_paths(settings) if secret}
    assert places[str(config)] == "the gateway's config file"
    assert places[str(etc / "env")] == "the gateway's environment file"
