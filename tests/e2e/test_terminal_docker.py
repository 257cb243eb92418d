"""The Docker backend against a real engine. Where no engine is reachable every test here is
skipped (and reported as not run): the backend is never faked."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config import DockerTerminalSettings
from tests.fixtures_terminal import LIMITS
from tools.shell.terminal.base import BackendUnavailable, run_command
from tools.shell.terminal.docker import DockerBackend, engine_version
from tools.shell.terminal.env import safe_env


def _engine() -> str:
    try:
        return engine_version()
    except BackendUnavailable as exc:
        return f"unavailable: {exc}"


ENGINE = _engine()
pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(ENGINE.startswith("unavailable"), reason=f"no Docker engine: {ENGINE}"),
]


@pytest.fixture
async def docker(tmp_path: Path) -> AsyncIterator[DockerBackend]:
    backend = DockerBackend(DockerTerminalSettings(), LIMITS, network=False)
    try:
        yield backend
    finally:
        await backend.close()


async def sh(backend: DockerBackend, ws: Path, command: str, limit: float = 60) -> str:
    result = await run_command(
        backend, command, workspace=ws, cwd=ws, env=safe_env(), timeout=limit, max_chars=10_000
    )
    return result.render(limit)


async def test_runs_in_a_container_with_the_workspace(
    docker: DockerBackend, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    out = await sh(docker, ws, "echo in > made.txt; pwd; cat /proc/1/cmdline | tr '\\0' ' '")
    assert out.startswith(f"{ws}\n") and out.endswith("[exit code 0]")
    assert (ws / "made.txt").read_text() == "in\n"
    assert "chatgate" not in out  # PID 1 is the container's init, not the gateway


async def test_no_network_by_default(docker: DockerBackend, tmp_path: Path) -> None:
    assert await sh(docker, tmp_path, "ls /sys/class/net") == "lo\n[exit code 0]"


async def test_timeout_stops_the_command(docker: DockerBackend, tmp_path: Path) -> None:
    out = await sh(docker, tmp_path, "sleep 300 & sleep 300", limit=2)
    assert "timed out after 2 s" in out
    left = await sh(docker, tmp_path, "ps -eo comm | grep -c '^sleep$' || true")
    assert left.startswith("0\n")


async def test_idle_container_is_removed(tmp_path: Path) -> None:
    backend = DockerBackend(DockerTerminalSettings(idle_seconds=1), LIMITS, network=False)
    try:
        name = await backend.container(tmp_path)
        assert await backend._docker("inspect", "--format", "{{.State.Running}}", name) == "true"
        for _ in range(100):
            if await backend._docker("inspect", name, check=False) in ("", "[]"):
                break
            await asyncio.sleep(0.1)
        assert await backend._docker("inspect", name, check=False) in ("", "[]")
    finally:
        await backend.close()
