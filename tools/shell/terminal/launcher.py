"""Supervisor of one command on this host: it applies the resource limits, becomes the
subreaper of everything the command starts (so `setsid` and double forks cannot escape), and
ends that whole tree when the command exits or when it is told to stop (SIGTERM).

Standalone: started as `python -I -S launcher.py SPEC ARGV...`, it imports only the standard
library. SPEC is JSON: {"parent": pid, "grace": s, "cpu": s, "data": bytes, "nproc": n}, plus
"uid" and "gid" when the command is to run as another user (the launcher itself does not),
"confine": 1 to put the command in a Landlock domain (see `confine`), and "pins": [[path,
where it led], ...] that must still lead there when the command starts (else exit MOVED).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import stat
import struct
import sys
import threading
import time
import warnings  # noqa: F401 - os.execvp imports it late, maybe after a uid switch

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
# Landlock system calls (the same numbers on every architecture) and flags.
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_ACCESS_FS_EXECUTE = 1
LANDLOCK_SCOPE_SIGNAL = 2
SIGNAL_SCOPE_ABI = 6  # the first Landlock version that scopes signals
_SETTLE = 5.0  # seconds spent killing a tree that keeps forking before giving up
MOVED = 123  # exit code: a pinned path leads elsewhere than when the command was judged


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


def landlock_abi() -> int:
    """The kernel's Landlock version; 0 when it has none (or it is not enabled)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(int(abi), 0)


def confine() -> str:
    """Put this process (and so the command and all it starts) in a new Landlock domain;
    returns why not, or "".

    A process in a domain cannot read the /proc/<pid>/environ, memory or open files of a
    process outside it (the gateway, the launcher, the browser, MCP servers), even one of
    the same user; with Landlock 6 it cannot signal them either (`kill -STOP $PPID`).
    Files and the network are not restricted. No new privileges: set-uid programs do not
    gain theirs.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = landlock_abi()
    if abi <= 0:
        return "the kernel has no Landlock"
    if abi >= SIGNAL_SCOPE_ABI:
        attr = struct.pack("QQQ", 0, 0, LANDLOCK_SCOPE_SIGNAL)
    else:
        # Older versions need some handled access: executing, allowed everywhere below.
        attr = struct.pack("Q", LANDLOCK_ACCESS_FS_EXECUTE)
    ruleset = libc.syscall(SYS_LANDLOCK_CREATE_RULESET, attr, len(attr), 0)
    if ruleset < 0:
        return f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
    try:
        if abi < SIGNAL_SCOPE_ABI:
            root = os.open("/", os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", LANDLOCK_ACCESS_FS_EXECUTE, root)
                if libc.syscall(
                    SYS_LANDLOCK_ADD_RULE, ruleset, LANDLOCK_RULE_PATH_BENEATH, rule, 0
                ):
                    return f"landlock_add_rule: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(root)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"no_new_privs: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            return f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return ""


def _limit(kind: int, value: int) -> None:
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(kind, (value, hard if kind == resource.RLIMIT_CPU else value))


def _moved(pins: list[list[str]]) -> str:
    # base.moved, restated: this file runs standalone on the standard library alone.
    for path, then in pins:
        now = os.path.realpath(path)
        if now != then:
            return (
                f"not run: {path} leads to {now} now, not to {then} as when the command was "
                "judged; run it again to have it judged (and approved) as it is now\n"
            )
    return ""


def _exec(argv: list[str], spec: dict[str, int], pins: list[list[str]]) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE; commands expect the default
    # The last moment before the command starts, with the gateway's own view of the disk:
    # a target swapped for a symbolic link since it was judged (by another command running
    # meanwhile) stops it here.
    why = _moved(pins)
    if why:
        os.write(2, why.encode())
        os._exit(MOVED)
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
    if spec.get("confine"):
        why = confine()
        if why:  # asked for because the kernel has it: never run the command unconfined
            os.write(2, f"cannot confine the command: {why}\n".encode())
            os._exit(126)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc.strerror}\n".encode())
    os._exit(127)


def stdin_as_pipe() -> None:
    """Give the command a pipe for stdin when the gateway handed over a socket (uvloop's
    subprocess pipes are socket pairs), fed from that socket by a thread of this launcher.

    Bash takes a socket on stdin for a login by rshd and sources ~/.bashrc for every
    `bash -c`: the command would run the user's shell set-up (a pyenv rehash that waits on
    a lock, say) and see a socket where a shell pipeline gives a pipe."""
    try:
        if not stat.S_ISSOCK(os.fstat(0).st_mode):
            return
    except OSError:
        return
    source = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)
    os.set_inheritable(source, False)
    os.set_inheritable(write_end, False)

    def relay() -> None:
        with contextlib.suppress(OSError):  # the command closed its stdin or exited
            while chunk := os.read(source, 65536):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(write_end, view) :]
        os.close(write_end)

    threading.Thread(target=relay, daemon=True).start()


def main(args: list[str]) -> int:
    spec = json.loads(args[0])
    pins = spec.pop("pins", [])
    argv = args[1:]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    if os.getppid() != spec.get("parent", os.getppid()):
        return 125  # the gateway died before the death signal was armed
    stdin_as_pipe()
    child = os.fork()
    if child == 0:
        _exec(argv, spec, pins)
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
