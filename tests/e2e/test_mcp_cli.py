"""`chatgate mcp list | resources | prompts`, and MCP in `tools list`, `doctor` and
`config show`, run through the real `main` against the fake server started from settings."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app.cli import main
from tests.fakes.llm import ScriptedLLM
from tests.fakes.mcp_launch import SERVER_SCRIPT

pytestmark = pytest.mark.e2e


@pytest.fixture(autouse=True)
def _keep_logging() -> Iterator[None]:
    # The commands set up logging for a terminal; give pytest its handlers back afterwards.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    import sys

    monkeypatch.setenv("CHATGATE_DATA_DIR", str(tmp_path / "data"))
    path = tmp_path / "chatgate.toml"
    path.write_text(
        "[mcp.servers.notes]\n"
        f"command = {sys.executable!r}\n"
        f"args = [{str(SERVER_SCRIPT)!r}]\n"
        f"env = {{ FAKE_MCP_DIR = {str(tmp_path / 's')!r}, NOTES_TOKEN = 'tok-secret-4242' }}\n"
        'prompt_commands = ["summarize"]\n'
        "trust_hints = true\n"
        "[mcp.servers.ghost]\n"
        f"command = {str(tmp_path / 'missing-program')!r}\n"
        "[mcp.servers.later]\n"
        'url = "http://127.0.0.1:9/mcp"\n'
        "enabled = false\n"
        'headers = { Authorization = "Bearer hdr-secret-77" }\n'
    )
    return str(path)


def test_mcp_list_shows_each_server_its_state_and_tools(
    config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", config, "mcp", "list"]) == 1  # ghost failed
    out = capsys.readouterr().out
    servers, notes = out.split("\n\n")
    rows = {line.split()[0]: line.split(maxsplit=4)[1:] for line in servers.splitlines()[1:]}
    assert rows["notes"][:3] == ["stdio", "connected", "11"]
    assert rows["ghost"][:3] == ["stdio", "failed", "0"]
    assert rows["ghost"][3].startswith("command not found:")
    assert rows["later"] == ["http", "stopped", "0", "disabled"]
    assert notes.startswith("notes (group:mcp:notes):")
    tools = {line.split()[0]: line for line in notes.splitlines()[2:]}
    assert "asks" in tools["mcp_notes_delete_note"] and "asks" not in tools["mcp_notes_echo"]


def test_mcp_resources_and_prompts(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config, "mcp", "resources", "notes"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:3] == ["notes://readme", "readme", "text/markdown"]
    assert main(["--config", config, "mcp", "resources", "notes", "--read", "notes://readme"]) == 0
    assert capsys.readouterr().out == "[resource notes://readme]\n# Notes\nA fake notes server.\n"
    assert main(["--config", config, "mcp", "prompts", "notes"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:3] == ["summarize", "topic", "yes"]
    assert main(["--config", config, "mcp", "resources", "nope"]) == 2
    assert "no MCP server named 'nope'; configured: notes, ghost, later" in capsys.readouterr().err
    assert main(["--config", config, "mcp", "prompts", "ghost"]) == 1
    assert "MCP server ghost: failed, command not found" in capsys.readouterr().err


def test_tools_list_and_groups_include_mcp_tools(
    config: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--config", config, "tools", "list", "--deny", "group:mcp:ghost"]) == 0
    captured = capsys.readouterr()
    listed = {
        line.split()[0]: line.split()[1] for line in captured.out.split("\n\n")[1].splitlines()[1:]
    }
    assert listed["mcp_notes_echo"] == "mcp:notes" and "read_file" in listed
    assert "note: MCP server ghost: failed, command not found" in captured.err
    assert main(["--config", config, "tools", "groups"]) == 0
    groups = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "mcp_notes_echo" in groups["group:mcp"] and "mcp_notes_echo" in groups["group:mcp:notes"]
    assert "(none yet)" in groups["group:mcp:ghost"]


def test_config_show_masks_env_and_headers(config: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", config, "config", "show"]) == 0
    out = capsys.readouterr().out
    assert "tok-secret-4242" not in out and "hdr-secret-77" not in out
    servers = json.loads(out)["mcp"]["servers"]
    assert servers["notes"]["env"]["NOTES_TOKEN"] == "********"
    assert servers["later"]["headers"] == {"Authorization": "********"}


async def test_doctor_has_a_line_per_server(
    config: str,
    llm: ScriptedLLM,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CHATGATE_LLM__BASE_URL", llm.url)
    code = await asyncio.to_thread(main, ["--config", config, "doctor"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "pass  mcp notes: stdio, connected, 11 tools" in out
    assert "FAIL  mcp ghost: stdio, failed: command not found" in out
    assert "fix: check mcp.servers.ghost.command, args and env" in out
    assert "mcp later" not in out  # disabled
