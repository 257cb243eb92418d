"""The local backend and the backend choice: the gateway's own environment out of reach
(non-dumpable), commands as an unprivileged user when the gateway is root, and the fallback
rules when the sandbox cannot run."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gateway.config import Settings
from tests.fixtures_terminal import LIMITS, SECRETS, alive, run_gateway_like
from tools.shell.terminal.base import BackendUnavailable, run_command
from tools.shell.terminal.doctor import terminal_checks
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.factory import build_backend
from tools.shell.terminal.local import LocalBackend
from tools.shell.terminal.process import RunAs, hand_over

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (run-as-user behaviour)")

READ_GATEWAY_ENV = [
    "cat /proc/{gw}/environ",
    "cat /proc/$(ps -o ppid= -p $PPID | tr -d ' ')/environ",  # the launcher's parent
    "tr '\\0' '\\n' < /proc/{gw}/task/{gw}/environ",
    "cp /proc/{gw}/environ copy && cat copy",
    "ps eww -p {gw}",
    "strings /proc/{gw}/mem 2>&1 | head -c 100",
]


@pytest.mark.parametrize("mode", ["plain", "harden"])
def test_commands_cannot_read_the_gateways_environment(
    open_dir: Path, run_user: str, mode: str
) -> None:
    """Issue 22 finding 1. `plain` is the gateway before the fix (it shows the test can fail):
    a command running as the gateway's own user reads its secrets from /proc."""
    ws = open_dir / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    out = run_gateway_like(open_dir, mode, "local", ws, READ_GATEWAY_ENV, user=run_user)
    leaked = [name for name, value in SECRETS.items() if value in out]
    if mode == "plain":
        assert leaked == list(SECRETS)
    else:
        assert leaked == [], out
        assert "Permission denied" in out


@root_only
async def test_root_gateway_runs_commands_as_the_configured_user(
    open_dir: Path, run_user: str
) -> None:
    data = open_dir / "data"
    data.mkdir(mode=0o700)
    (data / "chatgate.db").write_text("STORE-SECRET")
    config = open_dir / "chatgate.toml"
    config.write_text('telegram.token = "CONFIG-SECRET"')
    config.chmod(0o600)
    ws = open_dir / "ws"
    ws.mkdir()
    backend = LocalBackend(LIMITS, user=run_user)
    assert backend.describe() == f"on the gateway host as {run_user} (not sandboxed)"
    result = await run_command(
        backend,
        f"id -un; cat {data}/chatgate.db {config} /proc/{os.getpid()}/environ; echo w > mine",
        workspace=ws,
        cwd=ws,
        env=safe_env(),
        timeout=10,
        max_chars=10_000,
    )
    out = result.output
    assert out.splitlines()[0] == run_user
    assert "SECRET" not in out and out.count("Permission denied") == 3
    assert (ws / "mine").stat().st_uid == backend.run_as.uid  # type: ignore[union-attr]


@root_only
def test_root_gateway_needs_a_local_user() -> None:
    with pytest.raises(BackendUnavailable, match=r"tools\.terminal\.local\.user"):
        LocalBackend(LIMITS)
    with pytest.raises(BackendUnavailable, match="does not exist"):
        LocalBackend(LIMITS, user="no-such-user-here")


def _no_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A PATH on which bwrap is really not found (the rest of the tools still are)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "setpriv", "ssh", "docker"):
        for where in ("/usr/bin", "/usr/local/bin", "/bin"):
            if os.path.exists(f"{where}/{tool}"):
                (bin_dir / tool).symlink_to(f"{where}/{tool}")
                break
    monkeypatch.setenv("PATH", str(bin_dir))


SettingsFor = Callable[..., Settings]


@pytest.fixture
def settings_for(tmp_path: Path, run_user: str) -> SettingsFor:
    def make(**terminal: object) -> Settings:
        terminal.setdefault("local", {"user": run_user})
        return Settings(data_dir=tmp_path / "data", tools={"terminal": terminal})

    return make


def test_no_sandbox_no_shell_unless_unsandboxed_is_allowed(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    settings_for: SettingsFor,
    caplog: pytest.LogCaptureFixture,
) -> None:
    _no_bwrap(monkeypatch, tmp_path)
    with caplog.at_level(logging.ERROR):
        choice = build_backend(settings_for())
    assert choice.backend is None
    assert "bubblewrap is not installed" in choice.summary
    assert "allow_unsandboxed" in caplog.text
    fallback = build_backend(settings_for(allow_unsandboxed=True))
    assert isinstance(fallback.backend, LocalBackend)
    assert "falling back to the local backend" in fallback.summary


def test_docker_without_an_engine_is_reported_not_faked(
    monkeypatch: pytest.MonkeyPatch, settings_for: SettingsFor
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    choice = build_backend(settings_for(backend="docker"))
    assert choice.backend is None
    assert "docker" in choice.summary.lower()


async def test_doctor_reports_the_terminal_and_the_workspace(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, settings_for: SettingsFor
) -> None:
    settings = settings_for()
    [term] = await terminal_checks(settings)
    assert term.ok and term.detail.startswith("sandbox (in the sandbox")
    old = settings.data_dir / "workspace"
    old.mkdir(parents=True)
    (old / "notes.md").write_text("left behind")
    _no_bwrap(monkeypatch, tmp_path)
    moved, term = await terminal_checks(settings)
    assert not moved.ok and moved.fix == f"mv {old} {settings.workspace}  (or set tools.workspace)"
    assert not term.ok and "bubblewrap is not installed" in term.detail
    assert "allow_unsandboxed" in term.fix


async def test_doctor_says_the_local_backend_shares_one_user(settings_for: SettingsFor) -> None:
    """Issue 30 finding 11: every chat's workspace belongs to the one user commands run as."""
    term, shared, *gaps = await terminal_checks(settings_for(backend="local"))
    assert term.ok and term.detail.startswith("local (on the gateway host")
    assert "runs every chat's commands as one user" in shared.detail
    assert "every other chat's workspace" in shared.detail
    assert gaps == []  # this kernel has Landlock with signal scoping


@root_only
def test_hand_over_never_reaches_outside_the_workspace(open_dir: Path, run_user: str) -> None:
    ws = open_dir / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "mine.txt").write_text("x")
    linked, pointed = open_dir / "linked", open_dir / "pointed"
    linked.write_text("outside")
    pointed.write_text("outside")
    os.link(linked, ws / "hardlink")
    (ws / "symlink").symlink_to(pointed)
    (ws / "dirlink").symlink_to(open_dir)
    user = RunAs.lookup(run_user)
    hand_over(ws, user)
    assert (ws / "sub" / "mine.txt").stat().st_uid == user.uid
    assert (ws / "sub").stat().st_uid == user.uid and ws.stat().st_uid == user.uid
    assert linked.stat().st_uid == 0 and pointed.stat().st_uid == 0 and open_dir.stat().st_uid == 0
    assert (ws / "symlink").lstat().st_uid == user.uid  # the link itself, not its target


@pytest.mark.parametrize("signal_name", ["STOP", "KILL"])
def test_a_command_cannot_stop_its_supervisor_and_setsid_children_end_with_it(
    open_dir: Path, run_user: str, signal_name: str
) -> None:
    """Issue 30 finding 10, on a non-root gateway (the commands run as its own user): a
    stopped or killed supervisor could not end the `setsid` child, which then ran on."""
    ws = open_dir / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    command = (
        "setsid sh -c 'echo $$ > child.pid; exec sleep 300' > /dev/null 2>&1 & "
        "until [ -s child.pid ]; do sleep 0.02; done; "
        f"kill -{signal_name} $PPID; echo signalled=$?"
    )
    out = run_gateway_like(open_dir, "harden", "local", ws, [command], user=run_user)
    child = int((ws / "child.pid").read_text())
    assert "signalled=1" in out, out
    assert not alive(child), out
