"""The process table alone: the rolling output buffer, the per-chat cap, stopping a chat's or a
folder's processes, and the sweep (idle, too old, workspace gone), on real local processes
started under the launcher."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tools.shell.processes import ProcessLimit, ProcessTable, RollingOutput
from tools.shell.terminal.base import Limits, Running
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.process import launch


def test_rolling_output_reads_what_is_new_and_counts_what_was_lost() -> None:
    out = RollingOutput(limit=10)
    out.feed(b"hello ")
    assert out.read_new() == ("hello ", 0)
    assert out.read_new() == ("", 0)
    out.feed(b"world, and more")  # 21 bytes written, the last 10 kept
    assert out.read_new() == (", and more", 5)
    assert out.tail(4) == "more"


def spawner(command: str, where: Path) -> Callable[[], Awaitable[Running]]:
    async def spawn() -> Running:
        return await launch(
            ["bash", "-c", command], cwd=where, env=safe_env(), limits=Limits(), stdin=True
        )

    return spawn


def new_table(**overrides: float) -> ProcessTable:
    values: dict[str, float] = {"max_per_chat": 2, "idle_seconds": 60, "max_seconds": 600}
    values.update(overrides)
    return ProcessTable(
        max_per_chat=int(values["max_per_chat"]),
        idle_seconds=values["idle_seconds"],
        max_seconds=values["max_seconds"],
        buffer_bytes=4096,
    )


async def test_the_cap_counts_running_processes_per_chat(tmp_path: Path) -> None:
    table = new_table()
    try:
        a = await table.add("c:1", tmp_path, "sleep", spawner("sleep 60", tmp_path))
        await table.add("c:1", tmp_path, "sleep", spawner("sleep 60", tmp_path))
        with pytest.raises(ProcessLimit, match="already runs 2 process"):
            await table.add("c:1", tmp_path, "sleep", spawner("sleep 60", tmp_path))
        await table.add("c:2", tmp_path, "sleep", spawner("sleep 60", tmp_path))
        assert table.get("c:2", a.id) is None  # another chat's process is not found
        await table.stop(a, "test")
        assert a.status() == "stopped (test)" and a.running.returncode is not None
        b = await table.add("c:1", tmp_path, "echo", spawner("echo hi", tmp_path))
        for _ in range(200):
            if b.running.returncode is not None:
                break
            await asyncio.sleep(0.02)
        assert b.status() == "exited with code 0"
        assert await table.stop_chat("c:1", "/stop all") == 1
        assert [p.alive for p in table.of_chat("c:1")] == [False, False, False]
    finally:
        await table.close()


async def test_stop_under_ends_the_processes_of_a_folder(tmp_path: Path) -> None:
    table = new_table()
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    try:
        p1 = await table.add("c:1", one, "s", spawner("sleep 60", one))
        p2 = await table.add("c:2", two, "s", spawner("sleep 60", two))
        assert await table.stop_under(one, "wiped") == 1
        assert not p1.alive and p1.status() == "stopped (wiped)" and p2.alive
    finally:
        await table.close()


async def test_the_sweep_stops_idle_old_and_homeless_processes(tmp_path: Path) -> None:
    table = new_table(max_per_chat=3, idle_seconds=30, max_seconds=100)
    gone = tmp_path / "gone"
    gone.mkdir()
    try:
        idle = await table.add("c:1", tmp_path, "s", spawner("sleep 60", tmp_path))
        old = await table.add("c:1", tmp_path, "s", spawner("sleep 60", tmp_path))
        homeless = await table.add("c:1", gone, "s", spawner("sleep 60", gone))
        now = time.monotonic()
        idle.touched = now - 31
        old.started = now - 101
        gone.rmdir()
        await table.sweep()
        assert idle.status() == "stopped (idle for 30 s)"
        assert old.status() == "stopped (ran for 100 s)"
        assert homeless.status() == "stopped (its workspace was deleted)"
    finally:
        await table.close()


async def test_a_command_reads_its_input_from_a_pipe_and_skips_the_shell_set_up(
    tmp_path: Path,
) -> None:
    """uvloop hands a child a socket for stdin, and bash takes a socket for an rshd login:
    it would source ~/.bashrc for every `bash -c` (a pyenv rehash there waited on its lock
    for 60 s). The launcher gives the command a pipe, fed from that socket."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(f"touch {tmp_path}/sourced\n")
    env = {**safe_env(), "HOME": str(home)}
    running = await launch(
        ["bash", "-c", "[ -p /dev/stdin ] && echo pipe; cat"],
        cwd=tmp_path,
        env=env,
        limits=Limits(),
        stdin=True,
    )
    assert running.stdin is not None
    running.stdin.write(b"line one\nline two\n")
    await running.stdin.drain()
    running.stdin.close()
    out = await asyncio.wait_for(running.stdout.read(), 10)
    assert out == b"pipe\nline one\nline two\n"
    for _ in range(250):
        if running.returncode is not None:
            break
        await asyncio.sleep(0.02)
    assert running.returncode == 0
    assert not (tmp_path / "sourced").exists()
    await running.stop()
