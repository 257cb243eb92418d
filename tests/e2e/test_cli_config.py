"""Bad configuration as an operator meets it: the real `chatgate` command in a subprocess
answers one line on stderr and exit code 2 (1 for a store it cannot open), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_cli import _env, chatgate
from tests.fakes.llm import ScriptedLLM

pytestmark = pytest.mark.e2e


async def one_line(env: dict[str, str], *args: str, cwd: Path, code: int) -> str:
    status, _, err = await chatgate(env, *args, cwd=cwd)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert (status, len(lines)) == (code, 1), err
    return lines[0]


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        (
            "CHATGATE_TELEGRM__TOKEN",
            "123:abc",
            "config error: CHATGATE_TELEGRM__TOKEN: no such setting; "
            "did you mean CHATGATE_TELEGRAM__TOKEN?",
        ),
        (
            "CHATGATE_ACCESS__ADMINS",
            "[x",
            "config error: CHATGATE_ACCESS__ADMINS: not valid JSON (Expecting value); "
            'write it like ["a", "b"]',
        ),
        (
            "CHATGATE_REDIS__URL",
            "redis://localhost:99999/0",
            "config error: redis.url: Value error, the port must be a number from 1 to 65535 "
            "(got 'redis://localhost:99999/0')",
        ),
        (
            "CHATGATE_APPROVALS__TIMEOUT_SECONDS",
            "1e12",
            "config error: approvals.timeout_seconds: Input should be less than or equal to "
            "604800 (got '1e12')",
        ),
    ],
    ids=["misspelt-name", "bad-json", "redis-port", "absurd-timeout"],
)
async def test_config_check_and_run_refuse_in_one_line(
    tmp_path: Path, llm: ScriptedLLM, variable: str, value: str, line: str
) -> None:
    env = _env(tmp_path, llm.url, **{variable: value})
    assert await one_line(env, "config", "check", cwd=tmp_path, code=2) == line
    # `run` stops at the same line, before it starts anything.
    env["CHATGATE_TELEGRAM__TOKEN"] = "123:abc"
    assert await one_line(env, "run", cwd=tmp_path, code=2) == line


async def test_run_with_a_workspace_it_cannot_create_says_so(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    env = _env(tmp_path, llm.url, CHATGATE_TELEGRAM__TOKEN="123:abc")
    # The default workspace sits beside the data directory; a file is in its way.
    (tmp_path / "data-workspace").write_text("not a directory")
    line = await one_line(env, "run", cwd=tmp_path, code=2)
    assert line.startswith(f"config error: tools.workspace: cannot use {tmp_path}/data-workspace (")
    assert "CHATGATE_TOOLS__WORKSPACE" in line
    assert await one_line(env, "ask", "hi", cwd=tmp_path, code=2) == line


async def test_run_with_a_data_dir_it_cannot_create_says_so(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    (tmp_path / "a-file").write_text("")
    env = _env(tmp_path, llm.url)
    env["CHATGATE_DATA_DIR"] = str(tmp_path / "a-file" / "data")
    line = await one_line(env, "ask", "hi", cwd=tmp_path, code=2)
    assert line.startswith(f"config error: data_dir: cannot use {tmp_path}/a-file/data (")
    assert "CHATGATE_DATA_DIR" in line
    assert await one_line(env, "config", "check", cwd=tmp_path, code=2) == line
    env["CHATGATE_TELEGRAM__TOKEN"] = "123:abc"
    assert await one_line(env, "run", cwd=tmp_path, code=2) == line
