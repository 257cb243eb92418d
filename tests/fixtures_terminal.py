"""Fixtures for the terminal backends: real bwrap sandboxes, a throwaway unprivileged user
for the local backend when the tests run as root, and directories that user can enter."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.shell.terminal.base import BackendUnavailable, Limits
from tools.shell.terminal.local import LocalBackend
from tools.shell.terminal.sandbox import SandboxBackend

LIMITS = Limits(cpu_seconds=60, memory_mb=1024, max_processes=256)


@pytest.fixture(scope="session")
def run_user() -> Iterator[str]:
    """As root: a new unprivileged user (removed afterwards); otherwise empty (not needed)."""
    if os.geteuid() != 0:
        yield ""
        return
    name = f"cgt{secrets.token_hex(3)}"
    for attempt in range(5):
        done = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            capture_output=True,
            text=True,
            check=False,
        )
        # The other test worker may hold /etc/passwd's lock while it adds its own user.
        if done.returncode == 0 or "lock" not in done.stderr:
            break
        time.sleep(0.2 * (attempt + 1))
    if done.returncode != 0:
        pytest.skip(f"cannot create a throwaway user with useradd: {done.stderr.strip()}")
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True, check=False)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory under /tmp that another user can enter (pytest's tmp_path is 0700)."""
    path = Path(tempfile.mkdtemp(prefix="cgt-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def make_sandbox() -> Callable[..., SandboxBackend]:
    def make(limits: Limits = LIMITS, **options: Any) -> SandboxBackend:
        try:
            return SandboxBackend(limits, **options)
        except BackendUnavailable as exc:
            pytest.skip(f"bwrap cannot sandbox here: {exc}")

    return make


@pytest.fixture
def make_local(run_user: str) -> Callable[..., LocalBackend]:
    def make(limits: Limits = LIMITS) -> LocalBackend:
        return LocalBackend(limits, user=run_user)

    return make


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


async def gone(pid: int, within: float = 3.0) -> bool:
    for _ in range(int(within / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return not alive(pid)


def host_pids(pattern: str) -> list[int]:
    """Live processes on this host whose command line contains `pattern`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if pattern in cmdline and alive(int(entry)):
            found.append(int(entry))
    return found


GATEWAY_SCRIPT = Path(__file__).parent / "e2e" / "terminal_gateway.py"
TERMINAL_PACKAGE = Path(__file__).parents[1] / "tools" / "shell" / "terminal"
SECRETS = {
    "CHATGATE_LLM__API_KEY": "sk-llm-key-0123456789",
    "CHATGATE_TELEGRAM__TOKEN": "123456:telegram-token-abcdef",
}


def run_gateway_like(
    where: Path, mode: str, kind: str, workspace: Path, commands: list[str], user: str = ""
) -> str:
    """Run tests/e2e/terminal_gateway.py with secrets in its environment, as `user` if set,
    from a copy of tools/shell/terminal that user can read; returns what it printed."""
    package = where / "pkg"
    shutil.copytree(TERMINAL_PACKAGE, package / "tools" / "shell" / "terminal")
    (package / "tools" / "__init__.py").write_text("")
    (package / "tools" / "shell" / "__init__.py").write_text("")
    shutil.copy(GATEWAY_SCRIPT, package / "terminal_gateway.py")
    for path in [package, *package.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    python = "/usr/bin/python3" if user and os.path.exists("/usr/bin/python3") else sys.executable
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(package), **SECRETS}
    done = subprocess.run(
        [python, str(package / "terminal_gateway.py"), mode, kind, str(workspace), *commands],
        capture_output=True,
        text=True,
        env=env,
        cwd=where,
        timeout=60,
        user=user or None,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
