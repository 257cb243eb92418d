"""The sandbox backend: each command runs under bubblewrap (`bwrap`) with the system
read-only, the chat's workspace read-write, its own /tmp, /proc and /dev, no network unless
allowed, and a PID namespace that dies with the command.

What is visible: /usr, /etc, /opt (read-only, minus the gateway's data directory, config file
and home if they live there), extra `ro_paths`, and the workspace. What is not: the rest of
the host (/home, /root, /var, /srv, /run, other workspaces), other processes, the network.
As root, bwrap runs privileged and the command itself runs as the unprivileged
`tools.terminal.sandbox.user` with no capabilities, so root-only files in /etc stay closed.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tools.shell.terminal.base import BackendUnavailable, Limits, Running
from tools.shell.terminal.process import RunAs, hand_over, launch
from tools.shell.terminal.seccomp import filter_fd, no_user_namespaces

_SYSTEM_DIRS = ("usr", "etc", "opt")
_MERGED = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SANDBOX_HOME = "/tmp"


class SandboxBackend:
    name = "sandbox"
    isolated = True

    def __init__(
        self,
        limits: Limits,
        *,
        network: bool = False,
        user: str = "nobody",
        hide: Sequence[Path] = (),
        ro_paths: Sequence[Path] = (),
    ) -> None:
        self._limits = limits
        self._network = network
        self._hide = [p.expanduser().resolve() for p in hide]
        self._ro_paths = [p.expanduser().resolve() for p in ro_paths]
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            raise BackendUnavailable("bubblewrap is not installed (apt-get install bubblewrap)")
        self._bwrap = bwrap
        self._run_as: RunAs | None = None
        self._setpriv = ""
        if os.geteuid() == 0:
            self._run_as = RunAs.lookup(user)
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                raise BackendUnavailable("setpriv is missing (apt-get install util-linux)")
            self._setpriv = setpriv
        self._help = _bwrap_help(bwrap)
        # No nested user namespaces: bwrap's own switch where its sandbox has a user
        # namespace (not as root), else a seccomp filter.
        self._disable_userns = self._run_as is None and "--disable-userns" in self._help
        self._seccomp = None if self._disable_userns else no_user_namespaces()
        self._probe()

    def describe(self) -> str:
        return "in the sandbox" + (" (with network)" if self._network else "")

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 - the caller stops the command
        stdin: bool = False,
        split_stderr: bool = False,
        pins: Sequence[tuple[str, str]] = (),
    ) -> Running:
        if self._run_as is not None:
            await asyncio.to_thread(hand_over, workspace, self._run_as)
        env = dict(env)
        env.pop("TMPDIR", None)
        user = self._run_as.name if self._run_as else getpass.getuser()
        env.update(PATH=SANDBOX_PATH, HOME=SANDBOX_HOME, USER=user, LOGNAME=user)
        with filter_fd(self._seccomp) as seccomp:
            return await launch(
                self.command(argv, workspace=workspace, cwd=cwd, seccomp=seccomp),
                cwd=Path("/"),
                env=env,
                limits=self._limits,
                stdin=stdin,
                split_stderr=split_stderr,
                pass_fds=() if seccomp is None else (seccomp,),
                pins=pins,
            )

    def command(
        self,
        argv: Sequence[str],
        *,
        workspace: Path | None,
        cwd: Path | None,
        seccomp: int | None = None,
    ) -> list[str]:
        """The full bwrap command line that runs `argv` in the sandbox; `seccomp`: the file
        descriptor of the filter to load (see tools/shell/terminal/seccomp.py)."""
        args = [self._bwrap, "--die-with-parent", "--new-session"]
        if seccomp is not None:
            args += ["--seccomp", str(seccomp)]
        if self._run_as is not None:
            # Privileged bwrap: no user namespace, so the command can become a real other
            # user (setpriv below) whose process limit and file permissions apply.
            args += ["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]
            if not self._network:
                args.append("--unshare-net")
            # Kept only until setpriv below switches user, which drops them all before the
            # command starts: to switch, and to enter a workspace already given to that user.
            args += ["--cap-drop", "ALL"]
            for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_READ_SEARCH"):
                args += ["--cap-add", cap]
        else:
            args.append("--unshare-all")
            if self._network:
                args.append("--share-net")
            if self._disable_userns:
                # No nested user namespaces (`unshare -r`): a kernel attack surface the
                # command has no use for.
                args += ["--unshare-user", "--disable-userns"]
        args += ["--hostname", "sandbox"]
        visible: list[Path] = []
        root = Path("/")
        for name in _MERGED:
            path = root / name
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
                visible.append(path)
        for path in (root / name for name in _SYSTEM_DIRS):
            if path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
                visible.append(path)
        args += ["--dev", "/dev", "--proc", "/proc"]
        args += self._tmpfs("/tmp", self._limits.memory_mb)
        layered: list[tuple[Path, list[str]]] = []
        for path in self._ro_paths:
            if path.exists():
                layered.append((path, ["--ro-bind", str(path), str(path)]))
                visible.append(path)
        if workspace is not None:
            layered.append((workspace, ["--bind", str(workspace), str(workspace)]))
            visible.append(workspace)
        if self._network:
            layered += [(p, ["--ro-bind", str(p), str(p)]) for p in self._resolver(visible)]
        for path in self._hide:
            if not any(path == v or path.is_relative_to(v) for v in visible):
                continue  # not mounted in the sandbox at all
            if path.is_dir():
                layered.append((path, self._tmpfs(str(path), 1, "0755")))
            elif path.exists():
                layered.append((path, ["--ro-bind", "/dev/null", str(path)]))
        # Parents before children: a hidden data directory inside the workspace stays hidden,
        # a workspace inside a hidden directory stays visible.
        made: set[Path] = set()
        for path, mount in sorted(layered, key=lambda item: len(item[0].parts)):
            args += self._parents(path, visible, made) + mount
        if cwd is not None:
            args += ["--chdir", str(cwd)]
        args.append("--")
        if self._run_as is not None:
            args += [
                self._setpriv,
                f"--reuid={self._run_as.uid}",
                f"--regid={self._run_as.gid}",
                "--clear-groups",
                "--inh-caps=-all",
                "--bounding-set=-all",
                "--no-new-privs",
                "--",
            ]
        return args + list(argv)

    def _tmpfs(self, path: str, megabytes: int, perms: str = "1777") -> list[str]:
        out: list[str] = []
        if "--perms" in self._help:
            out += ["--perms", perms]
        if "--size" in self._help:
            out += ["--size", str(megabytes * 1024 * 1024)]
        return [*out, "--tmpfs", path]

    def _parents(self, path: Path, visible: list[Path], made: set[Path]) -> list[str]:
        """Create the mount point's missing parents world-traversable: bwrap would make them
        0700 for root, and the command (as another user) could not use absolute paths."""
        out: list[str] = []
        for parent in reversed(path.parents):
            if parent == Path("/") or parent in made:
                continue
            if parent == Path("/tmp") or any(parent.is_relative_to(v) for v in visible):
                continue  # exists already in the sandbox
            made.add(parent)
            if "--perms" in self._help:
                out += ["--perms", "0755"]
            out += ["--dir", str(parent)]
        return out

    @staticmethod
    def _resolver(visible: list[Path]) -> list[Path]:
        """/etc/resolv.conf is often a link into /run, which the sandbox does not have."""
        conf = Path("/etc/resolv.conf")
        if not conf.is_symlink():
            return []
        target = conf.resolve()
        if not target.is_file() or any(target.is_relative_to(v) for v in visible):
            return []
        return [target]

    def _probe(self) -> None:
        """Run `true` in a sandbox once, so a host without user namespaces (or a container
        that forbids them) is reported at startup instead of on the first command."""
        try:
            with filter_fd(self._seccomp) as seccomp:
                done = subprocess.run(
                    self.command(["true"], workspace=None, cwd=None, seccomp=seccomp),
                    capture_output=True,
                    text=True,
                    timeout=20,
                    env={"PATH": SANDBOX_PATH},
                    check=False,
                    pass_fds=() if seccomp is None else (seccomp,),
                )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BackendUnavailable(f"bwrap could not start ({exc})") from None
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["no error message"])[-1]
            raise BackendUnavailable(
                f"bwrap cannot create a sandbox here ({why}); user namespaces are probably "
                "disabled (sysctl kernel.unprivileged_userns_clone=1, or run the container "
                "with the privileges bwrap needs)"
            )


def _bwrap_help(bwrap: str) -> str:
    try:
        done = subprocess.run(
            [bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout + done.stderr
