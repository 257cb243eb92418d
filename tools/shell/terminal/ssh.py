"""The SSH backend: commands run in `remote_dir` on another host, over one persistent OpenSSH
connection (a ControlMaster this backend owns), with the host key checked against
known_hosts: an unknown or changed key is refused, never trusted blindly.

It isolates the gateway host from the commands entirely (they run elsewhere) but isolates
nothing on the remote host beyond that account's own rights. Each conversation's commands
start in its own folder under remote_dir (the same name as its local workspace folder, made
on first use); that keeps chats apart by convention, not by a wall: the account can still
`cd` to another chat's folder.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import posixpath
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from gateway.sdk import SSHTerminalSettings, ToolError
from tools.shell.terminal.base import BackendUnavailable, Limits, Running
from tools.shell.terminal.remote import RemoteProcess, joined, new_pidfile, portable, wrapped


class SSHBackend:
    name = "ssh"
    isolated = False

    def __init__(
        self, settings: SSHTerminalSettings, limits: Limits, *, workspaces: Path | None = None
    ) -> None:
        ssh = shutil.which("ssh")
        if ssh is None:
            raise BackendUnavailable(
                "the OpenSSH client is missing (apt-get install openssh-client)"
            )
        self._ssh = ssh
        self._cfg = settings
        self._limits = limits
        # The local workspace root (resolved, as workspaces are): its chat folders are
        # mirrored under remote_dir.
        self._workspaces = workspaces.expanduser().resolve() if workspaces else None
        self._user = settings.user or getpass.getuser()
        self._dir: str | None = None
        self._master: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    def describe(self) -> str:
        return f"on {self._cfg.host} via SSH"

    @property
    def _socket(self) -> str:
        assert self._dir is not None
        return os.path.join(self._dir, "cm")

    def _socket_ready(self) -> bool:
        return os.path.exists(self._socket)

    def _options(self) -> list[str]:
        cfg = self._cfg
        known = cfg.known_hosts or Path.home() / ".ssh" / "known_hosts"
        args = [
            self._ssh,
            "-F",
            "/dev/null",  # only these options: no surprise from a user config
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={Path(known).expanduser()}",
            "-o",
            "GlobalKnownHostsFile=/dev/null",
            "-o",
            f"ConnectTimeout={max(int(cfg.connect_timeout), 1)}",
            "-o",
            "ServerAliveInterval=15",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            f"ControlPath={self._socket}",
            "-p",
            str(cfg.port),
            "-l",
            self._user,
        ]
        if cfg.key_file is not None:
            args += ["-i", str(cfg.key_file.expanduser()), "-o", "IdentitiesOnly=yes"]
        return args

    def _client_env(self) -> dict[str, str]:
        # The ssh client needs only these; the gateway's secrets stay here.
        return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "USER", "LANG")}

    async def start(self) -> None:
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="chatgate-ssh-")

    async def close(self) -> None:
        master, self._master = self._master, None
        if master is not None and master.returncode is None:
            master.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(master.wait(), 5)
            if master.returncode is None:
                master.kill()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def connect(self) -> None:
        """Open the shared connection if it is not up; a refused host key or login is a
        ToolError naming the cause."""
        await self.start()
        async with self._lock:
            master = self._master
            if master is not None and master.returncode is None and self._socket_ready():
                return
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._socket)
            master = await asyncio.create_subprocess_exec(
                *self._options(),
                "-M",
                "-N",
                "-o",
                "ControlMaster=yes",
                "-o",
                "ControlPersist=no",
                self._cfg.host,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                env=self._client_env(),
                start_new_session=True,
            )
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self._cfg.connect_timeout + 5
            while not self._socket_ready():
                if master.returncode is not None or loop.time() > deadline:
                    if master.returncode is None:
                        master.kill()
                    assert master.stderr is not None
                    err = (await master.stderr.read()).decode(errors="replace").strip()
                    await master.wait()
                    reason = _reason(err)
                    raise ToolError(f"cannot connect to {self._cfg.host} via SSH: {reason}")
                await asyncio.sleep(0.02)
            self._master = master

    async def _client(
        self, command: str, *, stdin: int, stdout: int, stderr: int
    ) -> asyncio.subprocess.Process:
        """An ssh client running `command` over the shared connection."""
        return await asyncio.create_subprocess_exec(
            *self._options(),
            "-o",
            "ControlMaster=no",
            "-T",
            self._cfg.host,
            "--",
            command,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            env=self._client_env(),
            start_new_session=True,
        )

    async def _run_remote(self, command: str) -> None:
        null = asyncio.subprocess.DEVNULL
        proc = await self._client(command, stdin=null, stdout=null, stderr=null)
        await proc.wait()

    def remote_path(self, workspace: Path, cwd: Path) -> str:
        """Where `cwd` of the chat `workspace` is on the remote host: remote_dir, then the
        chat's folder (as under the local workspace root), then the same subfolder."""
        parts = [self._cfg.remote_dir or "."]
        if self._workspaces is not None and workspace.is_relative_to(self._workspaces):
            parts.append(workspace.relative_to(self._workspaces).as_posix())
        parts.append(cwd.relative_to(workspace).as_posix())
        return posixpath.normpath(posixpath.join(*parts))

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 - also enforced on the remote host
        stdin: bool = False,
        split_stderr: bool = False,
        pins: Sequence[tuple[str, str]] = (),
    ) -> Running:
        # `pins` name this machine's disk; the commands run on another.
        await self.connect()
        pidfile = new_pidfile()
        remote = wrapped(
            argv,
            pidfile=pidfile,
            directory=self.remote_path(workspace, cwd),
            make_directory=True,  # a chat's folder appears on its first command
            timeout=timeout,
            limits=self._limits,
            env=portable(env),
        )
        proc = await self._client(
            joined(remote),
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if split_stderr else asyncio.subprocess.STDOUT,
        )
        return RemoteProcess(proc, self._run_remote, pidfile)


def _reason(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if "Host key verification failed" in line or "No ED25519 host key" in line:
            return (
                "the host key is unknown or has changed (add the host's key to known_hosts "
                "after checking it, e.g. with ssh-keyscan, and compare the fingerprint)"
            )
    return lines[-1] if lines else "the connection failed"
