"""Issue 30 finding 2, on a non-root gateway with the local backend: the browser's processes
(Playwright's node driver, Chromium, its helpers) and an MCP stdio server carried the
gateway's environment, and a command (running as the gateway's own user) read it, and the
MCP server's own token, from /proc/<pid>/environ with no prompt.

The gateway-like process (tests/e2e/children_gateway.py) runs as an unprivileged user with
the real browser and MCP code; the throwaway user needs the interpreter's packages, so the
test runs where the system Python matches the test interpreter."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config import BrowserSettings
from tests.fixtures_terminal import SECRETS
from tools.web.browser import ChromiumMissing, find_chromium

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
MCP_TOKEN = "mcp-notes-token-0123456789"


def _python_for(user: str, package: Path) -> tuple[str, dict[str, str]]:
    """The interpreter and environment the gateway-like process runs with as `user`."""
    packages = [p for p in site.getsitepackages() if Path(p).is_dir()]
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(package), *packages]),
        "HOME": str(package.parent),
        "TEST_MCP_TOKEN": MCP_TOKEN,
        **SECRETS,
    }
    if not user:
        return sys.executable, env
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    probe = (
        subprocess.run(
            [python, "-c", "import playwright, mcp, pydantic_core"],
            env=env,
            user=user,
            capture_output=True,
            text=True,
            check=False,
        )
        if os.path.exists(python)
        else None
    )
    if probe is None or probe.returncode != 0:
        pytest.skip(f"{user} cannot run this interpreter's packages with {python}")
    return python, env


def _copy_code(where: Path) -> Path:
    """gateway/, tools/ and the test pieces the process needs, readable by anyone."""
    package = where / "pkg"
    for name in ("gateway", "tools"):
        shutil.copytree(REPO / name, package / name, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "tests" / "e2e").mkdir(parents=True)
    shutil.copytree(REPO / "tests" / "fakes", package / "tests" / "fakes")
    (package / "tests" / "__init__.py").write_text("")
    (package / "tests" / "e2e" / "__init__.py").write_text("")
    shutil.copy(REPO / "tests" / "e2e" / "children_gateway.py", package / "tests" / "e2e")
    for path in [package, *package.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return package


def test_commands_cannot_read_the_browsers_or_mcp_servers_environment(
    open_dir: Path, run_user: str
) -> None:
    try:
        find_chromium(BrowserSettings())
    except ChromiumMissing as exc:
        pytest.skip(f"needs Chromium and Playwright: {exc}")
    package = _copy_code(open_dir)
    python, env = _python_for(run_user, package)
    ws, state = open_dir / "ws", open_dir / "mcp"
    for path in (ws, state):
        path.mkdir()
        path.chmod(0o777)
    commands = [
        "for p in {pids}; do cat /proc/$p/environ; echo; done",
        "for p in {pids}; do tr '\\0' '\\n' < /proc/$p/environ; done",
        "ps eww -A",
    ]
    done = subprocess.run(
        [
            python,
            str(package / "tests" / "e2e" / "children_gateway.py"),
            str(ws),
            str(state),
            *commands,
        ],
        env=env,
        cwd=open_dir,
        user=run_user or None,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    children = {int(pid): entry for pid, entry in report["children"].items()}
    kinds = {
        "driver": [p for p, (cmd, _) in children.items() if "run-driver" in cmd],
        "chromium": [p for p, (cmd, _) in children.items() if "--type=" in cmd],
        "mcp": [p for p, (cmd, _) in children.items() if "mcp_server.py" in cmd],
    }
    assert all(kinds.values()), children
    # As the gateway itself sees them: only the allowlist, and the MCP server's own token.
    for pid, (cmd, environ) in children.items():
        assert "CHATGATE_" not in environ, (cmd, environ)
        assert not any(value in environ for value in SECRETS.values()), cmd
        assert (MCP_TOKEN in environ) == (pid in kinds["mcp"]), cmd
    # As a command on the local backend sees them: nothing at all.
    for output in report["outputs"]:
        assert "CHATGATE_" not in output and MCP_TOKEN not in output, output
        assert not any(value in output for value in SECRETS.values()), output
    assert "Permission denied" in report["outputs"][0]
