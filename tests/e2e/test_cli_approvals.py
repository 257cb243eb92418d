"""`chatgate ask` with a command that needs approval: asked at a terminal, refused at once
without one. Real subprocesses; the terminal is a pseudo-terminal."""

from __future__ import annotations

import asyncio
import os
import pty
import sys
import time
from pathlib import Path

from tests.e2e.test_cli import _env
from tests.fakes.llm import Reply, ScriptedLLM, tool_results


async def test_ask_without_a_terminal_exits_3_at_once_naming_what_waits(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    # The approval would wait five minutes; without a terminal nobody can answer it.
    env = _env(tmp_path, llm.url, CHATGATE_APPROVALS__TIMEOUT_SECONDS="300")
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Removed."))
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.cli",
        "ask",
        "clean the build",
        env=env,
        cwd=tmp_path,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert time.monotonic() - started < 60  # far below the approval's five minutes
    assert proc.returncode == 3, err.decode()
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, lines
    assert "shell `rm -rf build` waits for approval" in lines[0]
    assert "chatgate chat" in lines[0] and "/admin" in lines[0]
    assert out == b""
    assert len(llm.requests) == 1  # the command never ran: no tool result went back


async def test_ask_at_a_terminal_shows_the_request_and_approve_lets_it_run(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    env = _env(tmp_path, llm.url)
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("All clean."))
    leader, follower = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.cli",
        "ask",
        "clean the build",
        env=env,
        cwd=tmp_path,
        stdin=follower,
        stderr=follower,
        stdout=asyncio.subprocess.PIPE,
    )
    os.close(follower)
    try:
        shown = await _read_until(leader, b"Type /approve ")
        text = shown.decode()
        assert "Approval needed" in text and "rm -rf build" in text
        request_id = text.rsplit("Type /approve ", 1)[1].split()[0]
        os.write(leader, f"/approve {request_id}\n".encode())
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(leader)
    assert proc.returncode == 0
    assert out.decode().strip() == "All clean."
    assert "[exit code 0]" in tool_results(llm.requests[1])[0]


async def _read_until(fd: int, marker: bytes, *, newline: bool = True) -> bytes:
    """What the program writes to the terminal from here until `marker` (and, with
    `newline`, the rest of its line)."""
    loop = asyncio.get_running_loop()
    seen = b""

    async def more() -> bytes:
        nonlocal seen
        while not (marker in seen and (not newline or b"\n" in seen.rsplit(marker, 1)[1])):
            chunk = await loop.run_in_executor(None, _read, fd)
            if not chunk:
                raise AssertionError(f"{marker!r} never showed; the terminal read: {seen!r}")
            seen += chunk
        return seen

    return await asyncio.wait_for(more(), 60)


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except OSError:  # the program closed the terminal
        return b""


async def test_chat_reads_approve_while_the_turn_waits(tmp_path: Path, llm: ScriptedLLM) -> None:
    env = _env(tmp_path, llm.url)
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("All clean."))
    leader, follower = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.cli",
        "chat",
        env=env,
        cwd=tmp_path,
        stdin=follower,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    try:
        await _read_until(leader, b"you> ", newline=False)
        os.write(leader, b"clean the build\n")
        shown = (await _read_until(leader, b"Or reply `/approve ")).decode()
        request_id = shown.rsplit("Or reply `/approve ", 1)[1].split("`")[0]
        os.write(leader, f"/approve {request_id}\n".encode())
        await _read_until(leader, b"All clean.")
        os.write(leader, b"\x04")  # Ctrl-D
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        os.close(leader)
    assert proc.returncode == 0
    assert "[exit code 0]" in tool_results(llm.requests[1])[0]
