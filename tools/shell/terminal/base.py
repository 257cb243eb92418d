"""The interface every terminal backend implements, and the run loop they share: start a
command, collect its output (head and tail kept), stop it and everything it started."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

KILL_GRACE = 2.0  # seconds a stopped command gets between SIGTERM and SIGKILL
DRAIN_SECONDS = 0.5  # how long output is still read after the command has exited
GUARD_SECONDS = 0.25  # how often a running command's guard is asked (run_command)
# The exit code of a command that did not start because a path it names leads elsewhere than
# when it was judged (the launcher's, tools/shell/terminal/launcher.py, is the same).
MOVED = 123
_READ_CHUNK = 65536
_POLL_SECONDS = 0.02


class BackendUnavailable(Exception):
    """The backend cannot run commands here (no bwrap, no engine, no connection); the message
    is one sentence saying why and what to do."""


@dataclass(frozen=True)
class Limits:
    """Resource limits applied to every process a command starts."""

    cpu_seconds: int = 120
    memory_mb: int = 2048
    max_processes: int = 256


@dataclass(frozen=True)
class RunResult:
    output: str
    exit_code: int | None
    timed_out: bool
    stopped: str = ""  # why the caller's guard stopped it ("" if it did not)

    def render(self, timeout: float) -> str:
        body = self.output.rstrip("\n") or "(no output)"
        if self.stopped:
            status = f"[stopped: {self.stopped}; the command and its child processes ended]"
        elif self.timed_out:
            status = (
                f"[timed out after {timeout:g} s; the command and its child processes were stopped]"
            )
        elif self.exit_code is not None and self.exit_code < 0:
            status = f"[killed by signal {-self.exit_code}]"
        else:
            status = f"[exit code {self.exit_code}]"
        return f"{body}\n{status}"


def moved(pins: Sequence[tuple[str, str]]) -> str:
    """Which pinned path leads elsewhere now, as a line for the command's output ("" if
    none)."""
    for path, then in pins:
        now = os.path.realpath(path)
        if now != then:
            return (
                f"not run: {path} leads to {now} now, not to {then} as when the command was "
                "judged; run it again to have it judged (and approved) as it is now\n"
            )
    return ""


class Running(Protocol):
    """A started command. `stdout` carries stderr too unless it was asked for separately."""

    stdin: asyncio.StreamWriter | None
    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader | None

    @property
    def returncode(self) -> int | None:
        """None while the command (and whatever it left running) is alive."""
        ...

    async def stop(self) -> None:
        """End the command and every process it started; idempotent, never raises."""
        ...


class ClientProcess:
    """What every `Running` backed by a local process shares (the launcher, ssh, docker)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self._proc = proc
        self.stdin = proc.stdin
        assert proc.stdout is not None
        self.stdout: asyncio.StreamReader = proc.stdout
        self.stderr = proc.stderr
        self._stopped = False

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode


class TerminalBackend(Protocol):
    """Where commands run: the sandbox, this host, a host over SSH, or a Docker container."""

    name: str
    # Whether a command here is confined (own filesystem view, no host secrets): execute_code
    # asks for approval by default when it is not.
    isolated: bool

    def describe(self) -> str:
        """Where a command runs, for approval prompts: "in the sandbox", "on build via SSH"."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 - advisory, see below
        stdin: bool = False,
        split_stderr: bool = False,
        pins: Sequence[tuple[str, str]] = (),
    ) -> Running:
        """Start `argv` in `cwd` (a directory inside `workspace`). `timeout` is advisory for
        backends that enforce it remotely as well; the caller stops the command in time.
        `pins`: paths on this machine and where they led when the command was judged; if
        one leads elsewhere when it would start, it does not start (exit `MOVED`, a line
        on its output saying which). Backends whose commands run elsewhere ignore them."""
        ...


async def run_command(
    backend: TerminalBackend,
    command: str,
    *,
    workspace: Path,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109 - the command's own limit, enforced by stopping it
    max_chars: int,
    pins: Sequence[tuple[str, str]] = (),
    guard: Callable[[], Awaitable[str]] | None = None,
) -> RunResult:
    """Run `bash -c command` on `backend`; stop it and everything it started when done.
    `pins`: see `TerminalBackend.spawn`; checked here too, for backends that cannot check
    them at the last moment. `guard`: asked every `GUARD_SECONDS` while the command runs;
    a reason it returns stops the command."""
    if why := moved(pins):
        return RunResult(why, MOVED, False)
    running = await backend.spawn(
        ["bash", "-c", command], workspace=workspace, cwd=cwd, env=env, timeout=timeout, pins=pins
    )
    buffer = OutputBuffer(max_chars)
    reader = asyncio.create_task(pump(running.stdout, buffer))
    timed_out = False
    stopped = ""
    try:
        if guard is None:
            timed_out = not await exited(running, timeout)
        else:
            timed_out, stopped = await _exited_or_stopped(running, timeout, guard)
        # Stops the command on timeout, and background children left behind otherwise:
        # they would keep the pipe open and run unattended.
        await running.stop()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(reader), DRAIN_SECONDS)
    finally:
        await asyncio.shield(running.stop())  # also when the call itself is cancelled
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return RunResult(buffer.render(), running.returncode, timed_out, stopped)


async def _exited_or_stopped(
    running: Running, seconds: float, guard: Callable[[], Awaitable[str]]
) -> tuple[bool, str]:
    """(timed out, why the guard stopped it) once the command exited, timed out or its
    guard gave a reason."""
    waiting = asyncio.create_task(exited(running, seconds))
    try:
        while not waiting.done():
            await asyncio.wait([waiting], timeout=GUARD_SECONDS)
            if waiting.done():
                break
            why = await guard()
            if why:
                return False, why
        return not waiting.result(), ""
    finally:
        waiting.cancel()


async def exited(running: Running, seconds: float) -> bool:
    """Wait up to `seconds` for the command to exit.

    Polled: on Python 3.11 `Process.wait()` also waits for the output pipe to close,
    which a background child can hold open for as long as it likes.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while running.returncode is None:
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(_POLL_SECONDS)
    return True


async def pump(stream: asyncio.StreamReader, buffer: OutputBuffer) -> None:
    while chunk := await stream.read(_READ_CHUNK):
        buffer.feed(chunk)


class OutputBuffer:
    """Keeps the first and last `limit` bytes of a stream of any size."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            del self.tail[: -self.limit]

    def render(self) -> str:
        """Everything if it fits in `limit` characters, else head and tail around a cut line."""
        limit = self.limit
        if self.total <= len(self.head) + len(self.tail):  # nothing was dropped
            text = bytes(self.head + self.tail).decode("utf-8", errors="replace")
            if len(text) <= limit:
                return text
            head, tail = text[: limit // 2], text[-(limit // 2) :]
        else:
            head = self.head.decode("utf-8", errors="replace")[: limit // 2]
            tail = self.tail.decode("utf-8", errors="replace")[-(limit // 2) :]
        cut = self.total - len(head.encode()) - len(tail.encode())
        return f"{head}\n[... {cut:,} bytes of output cut ...]\n{tail}"
