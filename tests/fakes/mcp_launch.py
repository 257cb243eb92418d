"""Starting the fake MCP server (tests/fakes/mcp_server.py) the way chatgate's settings would:
as a stdio command, or as an HTTP server in a child process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

SERVER_SCRIPT = Path(__file__).with_name("mcp_server.py")


def stdio_server(state_dir: Path, **extra: Any) -> dict[str, Any]:
    """Settings for `mcp.servers.<name>` that run the fake server over stdio; its read-only
    marks are trusted (`trust_hints`) unless `extra` says otherwise."""
    return {
        "command": sys.executable,
        "args": [str(SERVER_SCRIPT)],
        "env": {"FAKE_MCP_DIR": str(state_dir)},
        "startup_timeout_seconds": 20,
        "trust_hints": True,
        **extra,
    }


def calls(state_dir: Path) -> list[str]:
    """The state-changing tool calls the server really ran, oldest first."""
    log = state_dir / "calls.log"
    return log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def server_pid(state_dir: Path) -> int:
    return int((state_dir / "pid").read_text(encoding="utf-8"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.asynccontextmanager
async def http_server(state_dir: Path, *, sse: bool = False, token: str = "") -> AsyncIterator[str]:
    """Run the fake server over streamable HTTP (or SSE); yields its URL."""
    flags = ["--sse" if sse else "--http", *(["--token", token] if token else [])]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVER_SCRIPT),
        *flags,
        env={**os.environ, "FAKE_MCP_DIR": str(state_dir)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
        port = int(line.decode().strip().removeprefix("port="))
        yield f"http://127.0.0.1:{port}/{'sse' if sse else 'mcp'}"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
        await proc.wait()


async def wait_for(check: Callable[[], bool], *, within: float = 10, what: str = "") -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.02)
