"""Commands on this host, under the launcher (tools/shell/terminal/launcher.py): limits applied,
every descendant ended with the command, optionally as another (unprivileged) user."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import signal
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tools.shell.terminal import base
from tools.shell.terminal.base import BackendUnavailable, Limits

LAUNCHER = Path(__file__).with_name("launcher.py")


@dataclass(frozen=True)
class RunAs:
    """An unprivileged account commands run as when the gateway itself is root."""

    name: str
    uid: int
    gid: int
    home: str

    @classmethod
    def lookup(cls, name: str) -> RunAs:
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise BackendUnavailable(
                f"the user {name!r} does not exist; create it (useradd --system {name}) "
                "or set another one"
            ) from None
        if entry.pw_uid == 0:
            raise BackendUnavailable(f"the user {name!r} is root; name an unprivileged user")
        return cls(name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


class LaunchedProcess(base.ClientProcess):
    """A `base.Running` for a process started under the launcher."""

    def __init__(self, proc: asyncio.subprocess.Process, grace: float) -> None:
        super().__init__(proc)
        self._grace = grace

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.stdin is not None:
            self.stdin.close()
        if self._proc.returncode is not None:
            return  # the launcher exits only once everything below it has ended
        # The launcher ends the whole tree (SIGTERM, the grace, then SIGKILL) and exits.
        _signal(self._proc.pid, signal.SIGTERM, group=False)
        if not await base.exited(self, self._grace + 3.0):
            # Last resort: the launcher's own group (escaped children cannot be reached).
            _signal(self._proc.pid, signal.SIGKILL, group=True)
            await base.exited(self, 1.0)


async def launch(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    limits: Limits,
    run_as: RunAs | None = None,
    stdin: bool = False,
    split_stderr: bool = False,
    pass_fds: Sequence[int] = (),
    confine: bool = False,
    pins: Sequence[tuple[str, str]] = (),
) -> LaunchedProcess:
    """Start `argv` under the launcher; `confine` puts it in a Landlock domain (the kernel
    must have Landlock: see `launcher.landlock_abi`)."""
    spec = {
        "parent": os.getpid(),
        "grace": base.KILL_GRACE,
        "cpu": limits.cpu_seconds,
        "data": limits.memory_mb * 1024 * 1024,
        "nproc": limits.max_processes,
    }
    if run_as is not None:
        # The launcher stays the gateway's user, so it can read itself and end the tree;
        # only the command becomes `run_as`.
        spec.update(uid=run_as.uid, gid=run_as.gid)
    if confine:
        spec["confine"] = 1
    spec_json: dict[str, object] = dict(spec)
    if pins:
        spec_json["pins"] = [list(pin) for pin in pins]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        str(LAUNCHER),
        json.dumps(spec_json),
        *argv,
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE if split_stderr else asyncio.subprocess.STDOUT,
        start_new_session=True,
        pass_fds=tuple(pass_fds),
    )
    return LaunchedProcess(proc, base.KILL_GRACE)


def hand_over(root: Path, run_as: RunAs) -> None:
    """Give the gateway's own entries in the workspace to `run_as`, so commands running as
    that user can change what the file tools wrote.

    Never follows symlinks, also not in a parent a command swaps for one while this runs
    (each directory is held open and entries are changed relative to it), and skips files
    with several hard links: a command could have linked something from outside into it.
    """
    me = os.geteuid()
    _give(str(root), None, me, run_as)
    for _dirpath, dirnames, filenames, dir_fd in os.fwalk(root):
        for name in (*dirnames, *filenames):
            _give(name, dir_fd, me, run_as)


def _give(name: str, dir_fd: int | None, me: int, run_as: RunAs) -> None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return
    if info.st_uid != me:
        return
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        return
    with contextlib.suppress(OSError):
        os.chown(name, run_as.uid, run_as.gid, dir_fd=dir_fd, follow_symlinks=False)


def _signal(pid: int, sig: signal.Signals, *, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
