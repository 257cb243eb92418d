"""The SSH backend against a real sshd started on 127.0.0.1 (a free port, generated host and
client keys): commands in remote_dir over one connection, the same timeouts, and host keys
checked against known_hosts (unknown or changed keys refused)."""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import BaseModel

from gateway.config import Settings, SSHTerminalSettings
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolError, ToolSpec
from gateway.sessions.key import SessionKey
from tests.fixtures_terminal import LIMITS, host_pids
from tools.files.workspace import Workspace
from tools.registry import ToolRegistry
from tools.shell.code import CodeArgs, ExecuteCode
from tools.shell.terminal.base import run_command
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.ssh import SSHBackend

SSHD = "/usr/sbin/sshd"


@dataclass(frozen=True)
class SSHServer:
    port: int
    host_key_line: str  # "ssh-ed25519 AAAA..."
    client_key: Path
    home: Path  # a directory for known_hosts files and the remote_dir


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    if not os.path.exists(SSHD) or shutil.which("ssh-keygen") is None:
        pytest.skip("sshd is not installed (tests/run.sh installs openssh-server)")
    base = tmp_path_factory.mktemp("sshd")
    _keygen(base / "host_key")
    _keygen(base / "client_key")
    (base / "authorized_keys").write_text((base / "client_key.pub").read_text())
    port = _free_port()
    config = base / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {base / 'host_key'}\n"
        f"PidFile {base / 'sshd.pid'}\nAuthorizedKeysFile {base / 'authorized_keys'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n"
        f"AllowUsers {getpass.getuser()}\nLogLevel ERROR\nMaxSessions 50\nMaxStartups 50\n"
        # A home of its own: the login shell reads ~/.bashrc, and where the user's runs
        # `pyenv init`, its rehash waits up to 60 s on a lock file that a login killed
        # mid-rehash (a timed-out test command) left behind: every later command would
        # time out. Nothing here needs the user's own rc files.
        f"SetEnv HOME={base}\n"
    )
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                err = proc.stderr.read().decode() if proc.stderr else ""
                pytest.fail(f"sshd did not start: {err}")
            time.sleep(0.05)
    host_key = " ".join((base / "host_key.pub").read_text().split()[:2])
    try:
        yield SSHServer(port, host_key, base / "client_key", base)
    finally:
        proc.terminate()
        proc.wait(5)


def known_hosts(server: SSHServer, path: Path, key_line: str | None = None) -> Path:
    path.write_text(f"[127.0.0.1]:{server.port} {key_line or server.host_key_line}\n")
    return path


def backend_for(
    sshd: SSHServer, tmp_path: Path, remote: Path, workspaces: Path | None = None
) -> SSHBackend:
    return SSHBackend(
        SSHTerminalSettings(
            host="127.0.0.1",
            port=sshd.port,
            key_file=sshd.client_key,
            remote_dir=str(remote),
            known_hosts=known_hosts(sshd, tmp_path / "known_hosts"),
        ),
        LIMITS,
        workspaces=workspaces,
    )


@pytest.fixture
async def ssh(sshd: SSHServer, tmp_path: Path) -> AsyncIterator[SSHBackend]:
    remote = tmp_path / "remote"
    (remote / "sub").mkdir(parents=True)
    backend = backend_for(sshd, tmp_path, remote)
    try:
        yield backend
    finally:
        await backend.close()


async def sh(backend: SSHBackend, ws: Path, command: str, cwd: Path | None = None) -> str:
    result = await run_command(
        backend,
        command,
        workspace=ws,
        cwd=cwd or ws,
        env=safe_env(),
        timeout=2,
        max_chars=10_000,
    )
    return result.render(2)


async def test_runs_in_remote_dir_over_one_connection(ssh: SSHBackend, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    assert ssh.describe() == "on 127.0.0.1 via SSH"
    out = await sh(ssh, ws, "pwd; echo hello; exit 4")
    assert out == f"{tmp_path / 'remote'}\nhello\n[exit code 4]"
    master = ssh._master
    assert master is not None and master.returncode is None
    assert (await sh(ssh, ws, "pwd", cwd=ws / "sub")).startswith(f"{tmp_path / 'remote' / 'sub'}\n")
    assert ssh._master is master  # the same connection


async def test_gateway_secrets_stay_home(
    ssh: SSHBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATGATE_LLM__API_KEY", "sk-ssh-secret-9876")
    out = await sh(ssh, tmp_path, "env")
    assert "sk-ssh-secret" not in out and "GIT_TERMINAL_PROMPT=0" in out


async def test_timeout_stops_the_remote_command(ssh: SSHBackend, tmp_path: Path) -> None:
    mark = f"{3000 + os.getpid() % 1000}.{time.time_ns() % 10**6}"
    out = await sh(ssh, tmp_path, f"sleep {mark} & sleep {mark}")
    assert "timed out after 2 s" in out
    for _ in range(60):  # the remote host is this machine: look for the processes
        if not host_pids(f"sleep {mark}"):
            break
        await asyncio.sleep(0.05)
    assert not host_pids(f"sleep {mark}")


@pytest.mark.parametrize("case", ["unknown", "changed"])
async def test_host_key_is_checked(sshd: SSHServer, tmp_path: Path, case: str) -> None:
    if case == "unknown":
        path = tmp_path / "empty_known_hosts"
        path.write_text("")
        other = ""
    else:
        _keygen(tmp_path / "impostor")
        other = " ".join((tmp_path / "impostor.pub").read_text().split()[:2])
        path = known_hosts(sshd, tmp_path / "known_hosts", other)
    backend = SSHBackend(
        SSHTerminalSettings(
            host="127.0.0.1", port=sshd.port, key_file=sshd.client_key, known_hosts=path
        ),
        LIMITS,
    )
    try:
        with pytest.raises(ToolError, match="host key is unknown or has changed"):
            await sh(backend, tmp_path, "echo should-not-run > ran.txt")
    finally:
        await backend.close()
    assert not (Path.home() / "ran.txt").exists()
    # Nothing was learned: the file still trusts only what it trusted before.
    assert path.read_text().split()[1:] == other.split()


async def test_execute_code_over_ssh_calls_tools(ssh: SSHBackend, tmp_path: Path) -> None:
    """The script's tool channel is its own stdin and stderr, so it works over SSH too."""

    class Args(BaseModel):
        text: str

    async def upper(args: Args, ctx: ToolContext) -> str:
        return args.text.upper()

    settings = Settings(data_dir=tmp_path / "data")
    registry = ToolRegistry(
        [ToolSpec(name="upper", description="", args=Args, handler=upper, group="x")]
    )
    [tool] = ExecuteCode(
        lambda ctx: Workspace(tmp_path / "ws"), settings, ssh, catalog=registry, approvals=None
    ).specs()
    ctx = ToolContext(
        session=SessionKey("console", "t"),
        chat=ChatRef(platform="console", chat_id="t"),
        user=UserRef(platform="console", user_id="u"),
    )
    out = await tool.handler(
        CodeArgs(code="import os\nprint(os.getcwd(), tools.upper(text='remote'))"), ctx
    )
    assert out == f"{tmp_path / 'remote'} REMOTE\n[exit code 0]\n[tool calls (1): upper ok]"


async def test_each_chat_runs_in_its_own_remote_folder(sshd: SSHServer, tmp_path: Path) -> None:
    remote, root = tmp_path / "remote", tmp_path / "workspaces"
    remote.mkdir()
    backend = backend_for(sshd, tmp_path, remote, workspaces=root)
    alice, bob = root / "telegram-1", root / "telegram-2"
    (alice / "src").mkdir(parents=True)
    bob.mkdir()
    try:
        assert await sh(backend, alice, "pwd") == f"{remote / 'telegram-1'}\n[exit code 0]"
        await sh(backend, alice, "echo mine > notes.txt")
        assert "notes.txt" not in await sh(backend, bob, "ls -A")
        assert (await sh(backend, bob, "pwd")).startswith(f"{remote / 'telegram-2'}\n")
        in_src = await sh(backend, alice, "pwd; ls ..", cwd=alice / "src")
        assert in_src.startswith(f"{remote / 'telegram-1' / 'src'}\nnotes.txt")
        # The shared scope (the root itself) keeps remote_dir as it is.
        assert await sh(backend, root, "pwd") == f"{remote}\n[exit code 0]"
    finally:
        await backend.close()
    assert (remote / "telegram-1" / "notes.txt").read_text() == "mine\n"
