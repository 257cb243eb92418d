"""The shell tool end to end with real subprocesses: output, exit codes, timeouts that kill
the whole process group, output capping, a secret-free environment, and refusals."""

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.config import ToolsSettings
from gateway.messages import ChatRef, UserRef
from gateway.sessions import SessionKey
from gateway.tooling import ApprovalNeed, ToolContext, ToolError
from tools.shell import ShellArgs, safe_env, shell_tools
from tools.workspace import Workspace

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


def make_tool(ws: Workspace, **settings: Any) -> Any:
    options = {"shell_timeout": 5.0, "max_output_chars": 1000, **settings}
    secrets = options.pop("secrets", None)
    (tool,) = shell_tools(ws, ToolsSettings(**options), secrets=secrets)
    return tool


async def run(tool: Any, command: str, **args: Any) -> str:
    return str(await tool.handler(ShellArgs(command=command, **args), CTX))


def alive(pid: int) -> bool:
    """Running, not merely a zombie waiting for a parent (PID 1 may not reap here)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def gone(pid: int, within: float = 2.0) -> bool:
    for _ in range(int(within / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return not alive(pid)


def test_spec(ws: Workspace) -> None:
    tool = make_tool(ws)
    assert tool.name == "shell" and tool.group == "runtime"
    assert "workspace" in tool.description and "approv" in tool.description
    assert "blocked" in tool.description
    assert tool.timeout > 5.0  # our own timeout fires before the agent's


async def test_output_and_exit_code(ws: Workspace) -> None:
    out = await run(make_tool(ws), "echo out; echo err >&2; exit 3")
    assert "out" in out and "err" in out
    assert out.endswith("[exit code 3]")
    assert (await run(make_tool(ws), "true")).endswith("(no output)\n[exit code 0]")


async def test_runs_in_workspace_and_cwd(ws: Workspace) -> None:
    (ws.root / "sub").mkdir()
    tool = make_tool(ws)
    assert str(ws.root) in await run(tool, "pwd")
    assert (await run(tool, "pwd", cwd="sub")).startswith(str(ws.root / "sub"))


@pytest.mark.parametrize("cwd", ["..", "/etc", "sub/../../x"])
async def test_cwd_escape_refused(ws: Workspace, cwd: str) -> None:
    tool = make_tool(ws)
    with pytest.raises(ToolError, match="outside the workspace"):
        await run(tool, "pwd", cwd=cwd)
    with pytest.raises(ToolError, match="outside the workspace"):
        await tool.approval(ShellArgs(command="rm -rf x", cwd=cwd), CTX)


async def test_cwd_must_be_a_directory(ws: Workspace) -> None:
    (ws.root / "f.txt").write_text("x")
    with pytest.raises(ToolError, match="not a directory"):
        await run(make_tool(ws), "ls", cwd="f.txt")


async def test_timeout_kills_the_process_group(ws: Workspace) -> None:
    tool = make_tool(ws, shell_timeout=1.0)
    out = await run(tool, "sleep 30 & echo child=$!; echo started; sleep 30", timeout=60)
    assert "started" in out and "timed out after 1 s" in out
    pid = int(re.search(r"child=(\d+)", out).group(1))  # type: ignore[union-attr]
    assert await gone(pid), "the background child survived the timeout"


async def test_timeout_kills_children_that_ignore_sigterm(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tools.shell.KILL_GRACE", 0.2)
    tool = make_tool(ws, shell_timeout=0.5)
    out = await run(tool, "trap '' TERM; sleep 30 & echo child=$!; wait")
    assert "timed out" in out
    pid = int(re.search(r"child=(\d+)", out).group(1))  # type: ignore[union-attr]
    assert await gone(pid)


async def test_leftover_background_children_are_stopped(ws: Workspace) -> None:
    out = await run(make_tool(ws), "sleep 30 & echo child=$!")
    assert out.endswith("[exit code 0]")
    pid = int(re.search(r"child=(\d+)", out).group(1))  # type: ignore[union-attr]
    assert await gone(pid)


async def test_cancelled_call_kills_the_group(ws: Workspace) -> None:
    marker = ws.root / "pid"
    task = asyncio.create_task(run(make_tool(ws), f"sleep 30 & echo $! > {marker}; wait"))
    for _ in range(100):
        if marker.exists() and marker.read_text().strip():
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(int(marker.read_text()))


async def test_output_capped_keeping_head_and_tail(ws: Workspace) -> None:
    out = await run(make_tool(ws, max_output_chars=1000), "seq 1 20000")
    body = out.rsplit("\n[exit code", 1)[0]
    assert body.startswith("1\n2\n3\n") and body.endswith("19999\n20000")
    assert re.search(r"\[\.\.\. [\d,]+ bytes of output cut \.\.\.\]", body)
    assert len(body) < 1100


async def test_short_output_is_not_cut(ws: Workspace) -> None:
    out = await run(make_tool(ws), "seq 1 100")
    assert "cut" not in out and "\n100\n" in out


async def test_secrets_removed_from_env(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_TELEGRAM__TOKEN", "tg-123456:abcdef")
    monkeypatch.setenv("SOME_API_KEY", "sk-live-abcdef")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:hunter2@db/app")
    monkeypatch.setenv("INNOCENT_NAME", "value-equal-to-a-configured-secret")
    monkeypatch.setenv("KEEP_ME", "plain")
    tool = make_tool(ws, secrets=lambda: ["value-equal-to-a-configured-secret"])
    out = await run(tool, "env")
    for leaked in (
        "CHATGATE_",
        "tg-123456",
        "SOME_API_KEY",
        "sk-live",
        "hunter2",
        "value-equal-to-a-configured-secret",
    ):
        assert leaked not in out
    assert "KEEP_ME=plain" in out and "PATH=" in out and "HOME=" in out


def test_safe_env_keeps_the_basics() -> None:
    env = safe_env(
        base={
            "PATH": "/bin",
            "LANG": "C.UTF-8",
            "LC_ALL": "C",
            "PWD": "/x",
            "GITHUB_TOKEN": "t",
            "aws_secret_access_key": "s",
            "MONKEY": "ok",
            "X_PASSWORD": "p",
            "BEARER": "Bearer abcdefgh1234",
        },
        secrets=["abcdefgh1234"],
    )
    assert {"PATH", "LANG", "LC_ALL", "PWD", "MONKEY"} <= env.keys()
    assert not {"GITHUB_TOKEN", "aws_secret_access_key", "X_PASSWORD", "BEARER"} & env.keys()


async def test_block_refused_even_when_called_directly(ws: Workspace) -> None:
    tool = make_tool(ws)
    with pytest.raises(ToolError, match="refused: recursive delete of /"):
        await run(tool, "touch ran.txt && rm -rf /")
    with pytest.raises(ToolError, match="cannot be approved"):
        await run(tool, "touch ran.txt; shutdown -h now")
    assert not (ws.root / "ran.txt").exists()
    assert await tool.approval(ShellArgs(command="rm -rf /"), CTX) is None  # nobody is asked


async def test_approval_for_ask_and_allow(ws: Workspace) -> None:
    (ws.root / "sub").mkdir()
    tool = make_tool(ws)
    need = await tool.approval(ShellArgs(command="rm -rf build", cwd="sub"), CTX)
    assert need == ApprovalNeed(
        summary="rm -rf build",
        reason="recursive delete of build",
        shape=f"rm -f -r {ws.root / 'sub'}/build",  # the exact target, resolved
        cwd="sub",
    )
    assert await tool.approval(ShellArgs(command="ls -la"), CTX) is None


async def test_extra_patterns_from_settings(ws: Workspace) -> None:
    tool = make_tool(ws, shell_extra_block=[r"^terraform destroy"], shell_extra_allow=[r"^rm -rf"])
    with pytest.raises(ToolError, match="shell_extra_block"):
        await run(tool, "terraform destroy")
    assert await tool.approval(ShellArgs(command="rm -rf build"), CTX) is None


async def test_nul_byte_refused(ws: Workspace) -> None:
    with pytest.raises(ToolError, match="NUL"):
        await run(make_tool(ws), "echo a\x00b")


async def test_timeout_argument_is_capped(ws: Workspace) -> None:
    out = await run(make_tool(ws, shell_timeout=0.5), "sleep 5", timeout=100)
    assert "timed out after 0.5 s" in out
