"""Commands on another machine (SSH) or in a container (Docker): a bash wrapper there applies
the limits and the timeout, records the command's process group, and ends that group when
the command exits; `stop()` ends it from here through a second, short command."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence

from tools.shell.terminal import base
from tools.shell.terminal.base import Limits

# $1 pid file, $2 directory, $3 timeout, $4 grace, $5 CPU seconds, $6 data KiB, $7 "1" to
# make the directory first; then argv. Background jobs get /dev/null as stdin unless told
# otherwise, hence fd 3.
WRAPPER = r"""p=$1
[ "$7" = 1 ] && mkdir -p -- "$2" 2>/dev/null
cd -- "$2" || exit 126
ulimit -t "$5" 2>/dev/null; ulimit -d "$6" 2>/dev/null
t=$3; g=$4; shift 7
exec 3<&0
timeout -k "$g" "$t" "$@" <&3 3<&- &
c=$!
echo "$c" > "$p"
wait "$c"; s=$?
kill -KILL -- "-$c" 2>/dev/null
rm -f "$p"
exit "$s"
"""

# Ends the process group recorded in the pid file: SIGTERM, up to the grace, then SIGKILL.
_STOP = r"""p=$1
[ -s "$p" ] || exit 0
c=$(cat "$p")
kill -TERM -- "-$c" 2>/dev/null
i=0
while [ -e "$p" ] && [ "$i" -lt "$2" ]; do sleep 0.1; i=$((i+1)); done
kill -KILL -- "-$c" 2>/dev/null
rm -f "$p"
"""

Runner = Callable[[str], Awaitable[None]]
# What describes this host, not the command: the other side has its own.
_HOST_SPECIFIC = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TMPDIR", "PWD"})


def portable(env: Mapping[str, str]) -> dict[str, str]:
    """The part of a command's environment (already free of secrets) to send along."""
    return {k: v for k, v in env.items() if k not in _HOST_SPECIFIC}


def new_pidfile() -> str:
    return f"/tmp/chatgate-{secrets.token_hex(8)}.pid"


def wrapped(
    argv: Sequence[str],
    *,
    pidfile: str,
    directory: str,
    timeout: float,
    limits: Limits,
    env: Mapping[str, str],
    make_directory: bool = False,
) -> list[str]:
    """The argv that runs `argv` in `directory` (made first with `make_directory`) under the
    wrapper, with `env` added."""
    remote_timeout = timeout + base.KILL_GRACE + 1  # a backstop: stop() normally comes first
    return [
        "env",
        *(f"{k}={v}" for k, v in env.items()),
        "bash",
        "-c",
        WRAPPER,
        "chatgate",
        pidfile,
        directory,
        f"{remote_timeout:g}",
        f"{base.KILL_GRACE:g}",
        str(limits.cpu_seconds),
        str(limits.memory_mb * 1024),
        "1" if make_directory else "0",
        *argv,
    ]


def stopper(pidfile: str) -> list[str]:
    return ["bash", "-c", _STOP, "chatgate", pidfile, str(int(base.KILL_GRACE * 10))]


def joined(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(part) for part in argv)


class RemoteProcess(base.ClientProcess):
    """A `base.Running` for a local client process (ssh, docker exec) of a remote command."""

    def __init__(self, proc: asyncio.subprocess.Process, stop_remote: Runner, pidfile: str):
        super().__init__(proc)
        self._stop_remote = stop_remote
        self._pidfile = pidfile

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.stdin is not None:
            self.stdin.close()
        # 255 is the client's own failure (connection lost): the remote side may still run.
        if self._proc.returncode is None or self._proc.returncode == 255:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self._stop_remote(joined(stopper(self._pidfile))), base.KILL_GRACE + 10
                )
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), 2.0)
