"""Settings: TOML plus env, clear errors, masked secrets."""

from pathlib import Path

import pytest

from gateway.app.app import load_settings
from gateway.app.cli import main
from gateway.config import ConfigError, mask_url, masked


def test_toml_and_env_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "chatgate.toml"
    cfg.write_text(
        '[llm]\nmodel = "toml-model"\nbase_url = "http://llm:1/v1/"\n'
        '[access]\nadmins = ["telegram:1"]\n'
    )
    monkeypatch.setenv("CHATGATE_LLM__MODEL", "env-model")
    monkeypatch.setenv("CHATGATE_REDIS__URL", "redis://:hunter22@localhost:6379/0")
    settings = load_settings(cfg)
    assert settings.llm.model == "env-model"
    assert settings.llm.base_url == "http://llm:1/v1"
    assert settings.access.admins == ["telegram:1"]
    assert "hunter22" not in str(masked(settings))


def test_every_problem_is_one_line_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(
        '[llm]\ntool_call_format = "xml"\nbase_url = "ftp://x"\n[telegram]\ntokne = "1"\n'
    )
    with pytest.raises(ConfigError) as err:
        load_settings(cfg)
    problems = err.value.problems
    assert len(problems) == 3
    assert any(p.startswith("llm.tool_call_format:") for p in problems)
    assert any(p.startswith("llm.base_url:") for p in problems)
    assert any(p.startswith("telegram.tokne: unknown setting") for p in problems)


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_settings(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "missing.toml")


def test_cli_exit_code_2_and_masked_show(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("CHATGATE_LLM__TOOL_CALL_FORMAT", "nope")
    assert main(["config", "check"]) == 2
    assert "llm.tool_call_format" in capsys.readouterr().err
    monkeypatch.delenv("CHATGATE_LLM__TOOL_CALL_FORMAT")
    monkeypatch.setenv("CHATGATE_TELEGRAM__TOKEN", "123456:SECRET-TOKEN-VALUE")
    monkeypatch.setenv("CHATGATE_LLM__API_KEY", "sk-very-secret")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert "SECRET-TOKEN-VALUE" not in out and "sk-very-secret" not in out
    assert '"token": "********"' in out


def test_mask_url() -> None:
    assert mask_url("redis://user:pw@h:1/0") == "redis://user:****@h:1/0"
    assert mask_url("redis://h:1/0") == "redis://h:1/0"
