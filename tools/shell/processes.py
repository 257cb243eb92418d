"""Long-running commands a chat started with the `process` tool: each keeps running after the
call on the terminal backend, its output kept in a rolling buffer to read later, its stdin open.

A chat holds at most `max_per_chat` at once. A process nobody has read from, written to or
listed for `idle_seconds` is stopped, as is one that ran `max_seconds`; `/stop all` stops a
chat's, wiping a workspace stops those running in it, and the gateway stopping stops them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from tools.files.outside_reads import OutsideReads
from tools.shell.terminal.base import Running

log = logging.getLogger(__name__)

_READ_CHUNK = 65536
_GUARD_SECONDS = 1.0  # a process may run for hours: its guard (a folder walk) is asked less often


class ProcessLimit(Exception):
    """The chat already runs as many processes as it may; the message says which."""


@dataclass
class RollingOutput:
    """The last `limit` bytes a process wrote, with the absolute offset of each byte, so that
    a reader that fell behind learns how much it missed."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    total: int = 0  # bytes written since the start
    read_to: int = 0  # where the last read ended

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        del self.data[: -self.limit]

    def read_new(self) -> tuple[str, int]:
        """What came since the last read, and how many bytes of it were lost to the cap."""
        start = self.total - len(self.data)
        missed = max(0, start - self.read_to)
        fresh = bytes(self.data[max(0, self.read_to - start) :])
        self.read_to = self.total
        return fresh.decode("utf-8", errors="replace"), missed

    def tail(self, chars: int) -> str:
        return bytes(self.data[-chars * 4 :]).decode("utf-8", errors="replace")[-chars:]


@dataclass
class ManagedProcess:
    id: str
    chat: str  # the chat's address (ChatRef.address): the cap and /stop all count by it
    workspace: Path
    command: str
    running: Running
    output: RollingOutput
    started: float = field(default_factory=time.monotonic)
    touched: float = field(default_factory=time.monotonic)
    ended_because: str = ""  # set when the gateway stopped it ("idle", "/stop all", ...)
    reader: asyncio.Task[None] | None = None
    # What it opened among the files people sent (tools/files/outside_reads.py), if watched.
    outside: OutsideReads | None = None
    guarding: asyncio.Task[None] | None = None  # asks its guard while it runs

    @property
    def alive(self) -> bool:
        return self.running.returncode is None and not self.ended_because

    def status(self) -> str:
        if self.ended_because:
            return f"stopped ({self.ended_because})"
        code = self.running.returncode
        if code is None:
            return "running"
        return f"exited with code {code}" if code >= 0 else f"killed by signal {-code}"

    def line(self) -> str:
        age = time.monotonic() - self.started
        return f"{self.id}: {self.status()}, {_duration(age)} old: {self.command}"


class ProcessTable:
    """The processes of every chat in this gateway process, and their lifetimes."""

    def __init__(
        self,
        *,
        max_per_chat: int,
        idle_seconds: float,
        max_seconds: float,
        buffer_bytes: int,
        keep_alive: Callable[[Path], Awaitable[object]] | None = None,
    ) -> None:
        """`keep_alive`: called for each running process's workspace on every sweep (the
        Docker backend removes a container that looks unused)."""
        self.max_per_chat = max_per_chat
        self.idle_seconds = idle_seconds
        self.max_seconds = max_seconds
        self.buffer_bytes = buffer_bytes
        self._keep_alive = keep_alive
        self._procs: dict[str, ManagedProcess] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._locks: dict[str, asyncio.Lock] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.create_task(self._sweep_forever(), name="process sweeper")

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        await asyncio.gather(*(self._end(p, "the gateway stopped") for p in self.all()))
        self._procs.clear()

    # -- the table ------------------------------------------------------------------------------

    def all(self) -> list[ManagedProcess]:
        return list(self._procs.values())

    def of_chat(self, chat: str) -> list[ManagedProcess]:
        return [p for p in self._procs.values() if p.chat == chat]

    def get(self, chat: str, process_id: str) -> ManagedProcess | None:
        """The chat's process by id; another chat's is never found."""
        found = self._procs.get(process_id.strip())
        if found is None or found.chat != chat:
            return None
        found.touched = time.monotonic()
        return found

    async def add(
        self,
        chat: str,
        workspace: Path,
        command: str,
        spawn: Callable[[], Awaitable[Running]],
        *,
        outside: OutsideReads | None = None,
        guard: Callable[[], Awaitable[str]] | None = None,
    ) -> ManagedProcess:
        """Start a process for `chat` through `spawn`, unless the chat is at its cap (then
        ProcessLimit). Ended processes stay listed until the chat starts another in their
        place, so their last output can still be read. `outside`: kept with the process and
        closed when it ends; `guard`: asked every second while it runs, a reason it
        gives stops the process."""
        # Two starts in one chat at once must not both pass its cap; other chats go on.
        async with self._locks.setdefault(chat, asyncio.Lock()):
            self._forget_ended(chat)
            live = [p for p in self.of_chat(chat) if p.alive]
            if len(live) >= self.max_per_chat:
                raise ProcessLimit(
                    f"this chat already runs {len(live)} process(es), the most it may "
                    f"({', '.join(p.id for p in live)}); stop one first."
                )
            running = await spawn()
            proc = ManagedProcess(
                id="p" + secrets.token_hex(3),
                chat=chat,
                workspace=workspace,
                command=command,
                running=running,
                output=RollingOutput(self.buffer_bytes),
                outside=outside,
            )
            proc.reader = asyncio.create_task(self._pump(proc), name=f"process {proc.id}")
            if guard is not None:
                proc.guarding = asyncio.create_task(self._guard(proc, guard))
            self._procs[proc.id] = proc
        log.info("process started id=%s chat=%s", proc.id, chat)
        return proc

    def _forget_ended(self, chat: str) -> None:
        ended = [p for p in self.of_chat(chat) if not p.alive]
        # Keep the newest few ended ones readable; the rest go.
        for proc in ended[: max(0, len(ended) - self.max_per_chat)]:
            if proc.outside is not None:
                proc.outside.close()
            del self._procs[proc.id]

    async def stop(self, proc: ManagedProcess, why: str) -> None:
        await self._end(proc, why)

    async def stop_chat(self, chat: str, why: str) -> int:
        """Stop every running process of a chat; returns how many."""
        live = [p for p in self.of_chat(chat) if p.alive]
        await asyncio.gather(*(self._end(p, why) for p in live))
        return len(live)

    async def stop_under(self, folder: Path, why: str) -> int:
        """Stop every running process whose workspace is `folder` or inside it (both
        resolved paths, as `Workspace.root` is)."""
        live = [
            p
            for p in self.all()
            if p.alive and (p.workspace == folder or p.workspace.is_relative_to(folder))
        ]
        await asyncio.gather(*(self._end(p, why) for p in live))
        return len(live)

    # -- inside ---------------------------------------------------------------------------------

    async def _pump(self, proc: ManagedProcess) -> None:
        stream = proc.running.stdout
        with contextlib.suppress(Exception):
            while chunk := await stream.read(_READ_CHUNK):
                proc.output.feed(chunk)

    async def _guard(self, proc: ManagedProcess, guard: Callable[[], Awaitable[str]]) -> None:
        while proc.alive:
            await asyncio.sleep(_GUARD_SECONDS)
            try:
                why = await guard()
            except Exception:  # a failing check must not end the watching
                log.exception("process guard failed id=%s", proc.id)
                continue
            if why and proc.alive:
                await self._end(proc, why)

    async def _end(self, proc: ManagedProcess, why: str) -> None:
        if proc.alive:
            proc.ended_because = why
            log.info("process stopped id=%s chat=%s why=%s", proc.id, proc.chat, why)
        if proc.guarding is not None and proc.guarding is not asyncio.current_task():
            proc.guarding.cancel()
        await proc.running.stop()
        if proc.reader is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(proc.reader), 0.5)
            proc.reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await proc.reader
        # Kept open while it ran; what it read is checked when its output is read.
        if proc.outside is not None:
            proc.outside.check()
            proc.outside.close()

    async def sweep(self) -> None:
        """Stop what went idle, ran too long or lost its workspace; keep the rest alive."""
        now = time.monotonic()
        for proc in self.all():
            if not proc.alive:
                continue
            if now - proc.touched > self.idle_seconds:
                await self._end(proc, f"idle for {_duration(self.idle_seconds)}")
            elif now - proc.started > self.max_seconds:
                await self._end(proc, f"ran for {_duration(self.max_seconds)}")
            elif not proc.workspace.is_dir():
                await self._end(proc, "its workspace was deleted")
            elif self._keep_alive is not None:
                with contextlib.suppress(Exception):
                    await self._keep_alive(proc.workspace)

    async def _sweep_forever(self) -> None:
        every = max(0.2, min(self.idle_seconds / 4, 30.0))
        while True:
            await asyncio.sleep(every)
            try:
                await self.sweep()
            except Exception:  # one bad process must not end the sweeping
                log.exception("process sweep failed")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
