"""The shell tool end to end with real subprocesses, on the sandbox (bwrap) and the local
backend: output, exit codes, timeouts that stop every child (setsid and double forks too),
output capping, a secret-free environment, refusals, and approvals that say where it runs."""

import asyncio
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings, ToolsSettings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolError
from gateway.sessions.key import SessionKey
from tests.fixtures_terminal import host_pids
from tools.files.workspace import Workspace
from tools.registry import ToolRegistry
from tools.shell.family import TerminalTools
from tools.shell.terminal.base import TerminalBackend
from tools.shell.terminal.factory import BackendChoice
from tools.shell.tool import ShellArgs, ShellTool

CTX = ToolContext(
    session=SessionKey("console", "t"),
    chat=ChatRef(platform="console", chat_id="t"),
    user=UserRef(platform="console", user_id="u"),
)
Make = Callable[..., Any]


@pytest.fixture(params=["sandbox", "local"])
def backend(request: pytest.FixtureRequest) -> TerminalBackend:
    made: TerminalBackend = request.getfixturevalue(f"make_{request.param}")()
    return made


@pytest.fixture
def ws(open_dir: Path) -> Workspace:
    return Workspace(open_dir / "ws")


@pytest.fixture
def make(ws: Workspace, backend: TerminalBackend) -> Make:
    def build(**settings: Any) -> Any:
        options = {"shell_timeout": 5.0, "max_output_chars": 1000, **settings}
        secrets = options.pop("secrets", None)
        shell = ShellTool(lambda ctx: ws, ToolsSettings(**options), backend, secrets=secrets)
        (tool,) = shell.specs()
        return tool

    return build


async def run(tool: Any, command: str, **args: Any) -> str:
    return str(await tool.handler(ShellArgs(command=command, **args), CTX))


def marker() -> str:
    """A sleep argument no other process on the host has, to find it from outside."""
    return f"{1000 + secrets.randbelow(9000)}.{secrets.randbelow(10**6):06d}"


async def none_left(mark: str, within: float = 3.0) -> bool:
    for _ in range(int(within / 0.05)):
        if not host_pids(f"sleep {mark}"):
            return True
        await asyncio.sleep(0.05)
    return not host_pids(f"sleep {mark}")


def test_spec(make: Make) -> None:
    tool = make()
    assert tool.name == "shell" and tool.group == "runtime"
    assert "workspace" in tool.description and "approv" in tool.description
    assert "blocked" in tool.description
    assert tool.timeout > 5.0  # our own timeout fires before the agent's


async def test_no_backend_no_tool(ws: Workspace, tmp_path: Path) -> None:
    # The sandbox cannot run and unsandboxed commands are not allowed: no shell, no scripts.
    family = TerminalTools(
        Settings(data_dir=tmp_path),
        lambda ctx: ws,
        catalog=ToolRegistry(),
        approvals=None,
        terminal=BackendChoice(None, ("the sandbox backend cannot run here: no bwrap.",)),
    )
    assert family.specs() == []
    await family.close()


async def test_output_and_exit_code(make: Make) -> None:
    out = await run(make(), "echo out; echo err >&2; exit 3")
    assert "out" in out and "err" in out
    assert out.endswith("[exit code 3]")
    assert (await run(make(), "true")).endswith("(no output)\n[exit code 0]")


async def test_runs_in_workspace_and_cwd(ws: Workspace, make: Make) -> None:
    (ws.root / "sub").mkdir()
    tool = make()
    assert str(ws.root) in await run(tool, "pwd")
    assert (await run(tool, "pwd", cwd="sub")).startswith(str(ws.root / "sub"))
    await run(tool, "echo made > sub/new.txt")
    assert (ws.root / "sub" / "new.txt").read_text() == "made\n"


async def test_files_the_gateway_wrote_can_be_changed(ws: Workspace, make: Make) -> None:
    """As root the command runs as another user; what the file tools wrote is handed over."""
    (ws.root / "notes.txt").write_text("one\n")
    out = await run(make(), "echo two >> notes.txt && cat notes.txt")
    assert "one\ntwo" in out and out.endswith("[exit code 0]")


@pytest.mark.parametrize("cwd", ["..", "/etc", "sub/../../x"])
async def test_cwd_escape_refused(make: Make, cwd: str) -> None:
    tool = make()
    with pytest.raises(ToolError, match="outside the workspace"):
        await run(tool, "pwd", cwd=cwd)
    with pytest.raises(ToolError, match="outside the workspace"):
        await tool.approval(ShellArgs(command="rm -rf x", cwd=cwd), CTX)


async def test_cwd_must_be_a_directory(ws: Workspace, make: Make) -> None:
    (ws.root / "f.txt").write_text("x")
    with pytest.raises(ToolError, match="not a directory"):
        await run(make(), "ls", cwd="f.txt")


async def test_timeout_stops_the_command_and_its_children(make: Make) -> None:
    mark = marker()
    out = await run(make(shell_timeout=1.0), f"sleep {mark} & echo started; sleep {mark}")
    assert "started" in out and "timed out after 1 s" in out
    assert await none_left(mark), "a child survived the timeout"


async def test_timeout_kills_children_that_ignore_sigterm(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tools.shell.terminal.base.KILL_GRACE", 0.2)
    mark = marker()
    out = await run(make(shell_timeout=0.5), f"trap '' TERM; sleep {mark} & wait")
    assert "timed out" in out
    assert await none_left(mark)


@pytest.mark.parametrize(
    "launch",
    [
        "sleep {m} &",
        "setsid sleep {m} &",  # issue 22: setsid children outlived the call
        "( ( sleep {m} & ) & );",  # double fork: the child is orphaned at once
        "nohup setsid bash -c 'sleep {m}' >/dev/null 2>&1 &",
    ],
)
async def test_background_children_end_with_the_call(make: Make, launch: str) -> None:
    mark = marker()
    out = await run(make(), f"{launch.format(m=mark)} echo launched")
    assert out.endswith("launched\n[exit code 0]")
    assert await none_left(mark), f"{launch!r} outlived the call"


async def test_cancelled_call_stops_everything(ws: Workspace, make: Make) -> None:
    mark = marker()
    flag = ws.root / "started"
    task = asyncio.create_task(run(make(), f"setsid sleep {mark} & touch started; wait"))
    for _ in range(200):
        if flag.exists():
            break
        await asyncio.sleep(0.02)
    assert host_pids(f"sleep {mark}")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await none_left(mark)


async def test_output_capped_keeping_head_and_tail(make: Make) -> None:
    out = await run(make(max_output_chars=1000), "seq 1 20000")
    body = out.rsplit("\n[exit code", 1)[0]
    assert body.startswith("1\n2\n3\n") and body.endswith("19999\n20000")
    assert "bytes of output cut" in body
    assert len(body) < 1100


async def test_short_output_is_not_cut(make: Make) -> None:
    out = await run(make(), "seq 1 100")
    assert "cut" not in out and "\n100\n" in out


async def test_secrets_removed_from_env(make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHATGATE_TELEGRAM__TOKEN", "tg-123456:abcdef")
    monkeypatch.setenv("SOME_API_KEY", "sk-live-abcdef")
    monkeypatch.setenv("DATABASE_URL", "postgres://app:hunter2@db/app")
    monkeypatch.setenv("INNOCENT_NAME", "value-equal-to-a-configured-secret")
    monkeypatch.setenv("KEEP_ME", "plain")
    monkeypatch.setenv("LANG", "value-equal-to-a-configured-secret")
    tool = make(
        secrets=lambda: ["value-equal-to-a-configured-secret"],
        terminal={"env_passthrough": ["KEEP_ME"]},
    )
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


async def test_block_refused_even_when_called_directly(ws: Workspace, make: Make) -> None:
    tool = make()
    with pytest.raises(ToolError, match="refused: recursive delete of /"):
        await run(tool, "touch ran.txt && rm -rf /")
    with pytest.raises(ToolError, match="cannot be approved"):
        await run(tool, "touch ran.txt; shutdown -h now")
    assert not (ws.root / "ran.txt").exists()
    assert await tool.approval(ShellArgs(command="rm -rf /"), CTX) is None  # nobody is asked


async def test_approval_says_where_it_runs(
    ws: Workspace, make: Make, backend: TerminalBackend
) -> None:
    (ws.root / "sub").mkdir()
    tool = make()
    need = await tool.approval(ShellArgs(command="rm -rf build", cwd="sub"), CTX)
    assert need == ApprovalNeed(
        summary="rm -rf build",
        reason="recursive delete of build",
        shape=f"rm -f -r {ws.root / 'sub'}/build",  # the exact target, resolved
        cwd="sub",
        where=backend.describe(),
    )
    expected = "in the sandbox" if backend.name == "sandbox" else "on the gateway host"
    assert need.where.startswith(expected)
    assert await tool.approval(ShellArgs(command="ls -la"), CTX) is None


async def test_extra_patterns_from_settings(make: Make) -> None:
    tool = make(shell_extra_block=[r"^terraform destroy"], shell_extra_allow=[r"^rm -rf"])
    with pytest.raises(ToolError, match="shell_extra_block"):
        await run(tool, "terraform destroy")
    assert await tool.approval(ShellArgs(command="rm -rf build"), CTX) is None


async def test_nul_byte_refused(make: Make) -> None:
    with pytest.raises(ToolError, match="NUL"):
        await run(make(), "echo a\x00b")


async def test_timeout_argument_is_capped(make: Make) -> None:
    out = await run(make(shell_timeout=0.5), "sleep 5", timeout=100)
    assert "timed out after 0.5 s" in out


async def test_a_call_whose_targets_move_is_approved_once_only(make: Make, ws: Workspace) -> None:
    """Issue 30 finding 6: the approval step tells the gate when no standing approval may
    cover the call, for an asked-for command and, after outside content, an allowed one."""
    tool = make()
    (ws.root / "out").mkdir(parents=True)
    pinned = await tool.approval(ShellArgs(command="rm -rf out"), CTX)
    moving = await tool.approval(ShellArgs(command='rm -rf "$(cat t.txt)"'), CTX)
    assert isinstance(pinned, ApprovalNeed) and pinned.standing
    assert isinstance(moving, ApprovalNeed) and not moving.standing
    after = await tool.side_effects(ShellArgs(command="ls $(cat list.txt) > x"), CTX)
    assert isinstance(after, ApprovalNeed) and not after.standing
    plain = await tool.side_effects(ShellArgs(command="echo hi > x"), CTX)
    assert isinstance(plain, ApprovalNeed) and plain.standing


async def test_a_workspace_at_its_quota_runs_only_removals_and_reads(
    open_dir: Path, backend: TerminalBackend
) -> None:
    ws = Workspace(open_dir / "quota", quota_bytes=4096)
    shell = ShellTool(lambda ctx: ws, ToolsSettings(shell_timeout=5.0), backend)
    (tool,) = shell.specs()
    out = await run(tool, "head -c 8192 /dev/zero > big && echo wrote")
    assert "wrote" in out and "past its quota of 4,096 bytes" in out  # told at once
    with pytest.raises(ToolError, match="not run: the workspace holds 8,192 bytes"):
        await run(tool, "echo more > other")
    assert not (ws.root / "other").exists()
    assert "8192" in await run(tool, "wc -c big")  # reading still runs
    await run(tool, "rm -f big")  # and removing
    assert "again" in await run(tool, "echo again > other && cat other")


async def test_a_command_that_keeps_filling_the_workspace_is_stopped_at_its_quota(
    open_dir: Path, backend: TerminalBackend
) -> None:
    ws = Workspace(open_dir / "filling", quota_bytes=1_000_000)
    shell = ShellTool(lambda ctx: ws, ToolsSettings(shell_timeout=5.0), backend)
    (tool,) = shell.specs()
    # 100 kB every 0.1 s: the quota is passed after about a second, the timeout is at 5 s.
    filling = "for i in $(seq 1 60); do head -c 100000 /dev/zero > f$i; sleep 0.1; done; echo all"
    out = await run(tool, filling)
    assert "[stopped: the workspace holds" in out and "past its quota of 1,000,000" in out
    assert "all" not in out.splitlines()
    # Stopped near the quota, far below the 6 MB the loop would write.
    assert ws.used_bytes() < 3_000_000
