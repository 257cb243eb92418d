"""`chatgate tools list | groups | show` from a real config file, without a running gateway."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gateway.app.cli import main

CONFIG = """
[tools]
deny = ["memory"]
platform_profiles = { discord = "readonly" }
chat_profiles = { "slack:C1" = "readonly" }

[tools.profiles.readonly]
allow = ["group:fs", "web_fetch"]
deny = ["write_file", "edit_file", "save_attachment"]
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "chatgate.toml"
    path.write_text(CONFIG)
    return str(path)


def tools_listed(out: str) -> list[str]:
    table = out.split("\n\n")[1].splitlines()
    return [line.split()[0] for line in table[1:]]


def test_list_default_scope(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config, "tools", "list"]) == 0
    out = capsys.readouterr().out
    assert "memory" not in tools_listed(out)
    assert {"read_file", "edit_file", "web_fetch", "todo", "clarify"} <= set(tools_listed(out))
    assert "layers: global\n" in out


def test_list_for_a_chat_with_a_profile(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config, "tools", "list", "--chat", "slack:C1", "--all"]) == 0
    out = capsys.readouterr().out
    assert tools_listed(out) == ["read_file", "glob", "search", "web_fetch"]
    assert "layers: global, profile readonly (chat slack:C1)" in out
    assert "4 of " in out
    assert re.search(r"^edit_file +profile readonly \(chat slack:C1\)$", out, re.M)
    assert re.search(r"^memory +global$", out, re.M)


def test_list_for_a_platform_and_overrides(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--config", config, "tools", "list", "--platform", "discord", "--allow", "glob,search"]
    assert main(argv) == 0
    assert tools_listed(capsys.readouterr().out) == ["glob", "search"]
    assert main(["--config", config, "tools", "list", "--deny", "group:fs", "--subagent"]) == 0
    out = capsys.readouterr().out
    assert "read_file" not in tools_listed(out) and "memory" in tools_listed(out)
    assert "subagent=yes" in out


def test_unknown_names_exit_2(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config, "tools", "list", "--allow", "raed_file"]) == 2
    err = capsys.readouterr().err
    assert "config error: tools.allow: unknown tool 'raed_file' (did you mean 'read_file'?)" in err


def test_groups(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config, "tools", "groups"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^group:session +clarify, read_channel, todo ", out, re.M)
    assert re.search(r"^group:skills +skill, skill_manage ", out, re.M)
    assert re.search(r"^group:subagent +delegate ", out, re.M)


def test_show_prints_the_schema(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config, "tools", "show", "edit_file"]) == 0
    schema = json.loads(capsys.readouterr().out)
    params = schema["function"]["parameters"]
    assert schema["function"]["name"] == "edit_file"
    assert params["required"] == ["path", "old_text", "new_text"]
    assert "title" not in json.dumps(params)
    assert main(["--config", config, "tools", "show", "nope"]) == 2
    assert "no tool named 'nope'" in capsys.readouterr().err


def test_list_names_tools_a_platform_cannot_offer(
    config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", config, "tools", "list", "--platform", "telegram", "--all"]) == 0
    out = capsys.readouterr().out
    assert "read_channel" not in tools_listed(out)
    assert re.search(
        r"^read_channel +not offered: no running telegram adapter can read earlier messages$",
        out,
        re.M,
    )
