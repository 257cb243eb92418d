"""Supervisor of one command on this host: it applies the resource limits, becomes the
subreaper of everything the command starts (so `setsid` and double forks cannot escape), and
ends that whole tree when the command exits or when it is told to stop (SIGTERM).

Standalone: started as `python -I -S launcher.py SPEC ARGV...`, it imports only the standard
library. SPEC is JSON: {"parent": pid, "grace": s, "cpu": s, "data": bytes, "nproc": n}, plus
"uid" and "gid" when the command is to run as another user (the launcher itself does not).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import sys
import time
import warnings  # noqa: F401 - os.execvp imports it late, maybe after a uid switch

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_SETTLE = 5.0  # seconds spent killing a tree that keeps forking before giving up


class Stop(Exception):
    pass


def _stop(signum: int, frame: object) -> None:
    raise Stop


def descendants(root: int) -> list[int]:
    """Every live process below `root`, found through the parent links in /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found.append(pid)
            todo.append(pid)
    return found


class Tree:
    def __init__(self, child: int) -> None:
        self.child = child
        self.status: int | None = None

    def reap(self, block: bool = False) -> bool:
        """Collect exited children (orphans land here too); False when none are left."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.child:
                self.status = status
            if block:
                return True

    def signal_all(self, sig: int) -> None:
        for pid in descendants(os.getpid()):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)

    def kill_all(self) -> None:
        deadline = time.monotonic() + _SETTLE
        while time.monotonic() < deadline:
            self.signal_all(signal.SIGKILL)
            if not self.reap() and not descendants(os.getpid()):
                return
            time.sleep(0.01)

    def stop(self, grace: float) -> None:
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.status is None and time.monotonic() < deadline:
            if not self.reap():
                break
            time.sleep(0.02)
        self.kill_all()


def _limit(kind: int, value: int) -> None:
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(kind, (value, hard if kind == resource.RLIMIT_CPU else value))


def _exec(argv: list[str], spec: dict[str, int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE; commands expect the default
    if "uid" in spec:
        try:
            os.setgroups([])
            os.setgid(spec["gid"])
            os.setuid(spec["uid"])
        except OSError as exc:
            os.write(2, f"cannot switch to uid {spec['uid']}: {exc.strerror}\n".encode())
            os._exit(126)
    if spec.get("cpu"):
        _limit(resource.RLIMIT_CPU, spec["cpu"])
    if spec.get("data"):
        _limit(resource.RLIMIT_DATA, spec["data"])
    if spec.get("nproc"):
        _limit(resource.RLIMIT_NPROC, spec["nproc"])
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
    os._exit(127)


def main(args: list[str]) -> int:
    spec = json.loads(args[0])
    argv = args[1:]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    if os.getppid() != spec.get("parent", os.getppid()):
        return 125  # the gateway died before the death signal was armed
    child = os.fork()
    if child == 0:
        _exec(argv, spec)
    tree = Tree(child)
    try:
        while tree.status is None and tree.reap(block=True):
            pass
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        tree.kill_all()  # background processes end with the command
    except Stop:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        tree.stop(float(spec.get("grace", 2.0)))
    status = tree.status
    if status is None:
        return 128 + signal.SIGKILL
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)  # report it the way the shell's own death would be
        return 128 + number
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
