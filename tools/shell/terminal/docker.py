"""The Docker backend: each workspace (so each chat with per-chat workspaces) gets its own
container from `tools.terminal.docker.image`, with the workspace mounted at the same path,
memory/CPU/process limits, no network by default, no capabilities; a container unused for
`idle_seconds` is removed. Talks to the engine through the `docker` CLI.

It isolates like a container does (own filesystem, processes, network), sharing the host
kernel; the workspace is the only host path it sees.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from gateway.sdk import DockerTerminalSettings, ToolError
from tools.shell.terminal.base import BackendUnavailable, Limits, Running
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.remote import RemoteProcess, new_pidfile, portable, wrapped

log = logging.getLogger(__name__)
LABEL = "chatgate.terminal"
# What the docker CLI reads besides the allowlist: which engine, its TLS files, its config.
_CLIENT_VARIABLES = (
    "DOCKER_HOST",
    "DOCKER_CONTEXT",
    "DOCKER_CONFIG",
    "DOCKER_TLS_VERIFY",
    "DOCKER_CERT_PATH",
    "DOCKER_API_VERSION",
)


def client_env() -> dict[str, str]:
    """The docker CLI's environment: the gateway's tokens and keys stay here."""
    return safe_env(passthrough=_CLIENT_VARIABLES)


def engine_version(cli: str = "docker") -> str:
    """The engine's version; BackendUnavailable when there is no CLI or no engine."""
    path = shutil.which(cli)
    if path is None:
        raise BackendUnavailable(f"the docker CLI ({cli}) is not installed")
    try:
        done = subprocess.run(
            [path, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
            env=client_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BackendUnavailable(f"the Docker engine did not answer ({exc})") from None
    if done.returncode != 0 or not done.stdout.strip():
        why = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        raise BackendUnavailable(f"no Docker engine is reachable ({why})")
    return done.stdout.strip()


class DockerBackend:
    name = "docker"
    isolated = True

    def __init__(self, settings: DockerTerminalSettings, limits: Limits, *, network: bool):
        self._cfg = settings
        self._limits = limits
        self._network = network
        engine_version(settings.cli)
        self._cli = shutil.which(settings.cli) or settings.cli
        self._last_used: dict[str, float] = {}
        self._lock = asyncio.Lock()
        self._reaper: asyncio.Task[None] | None = None

    def describe(self) -> str:
        return f"in a Docker container ({self._cfg.image})"

    async def start(self) -> None:
        if self._reaper is None:
            self._reaper = asyncio.create_task(self._reap_idle(), name="docker idle reaper")

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
            self._reaper = None
        for name in list(self._last_used):
            await self._remove(name)

    async def _docker(self, *args: str, check: bool = True) -> str:
        proc = await asyncio.create_subprocess_exec(
            self._cli,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=client_env(),
        )
        out, err = await proc.communicate()
        if check and proc.returncode != 0:
            why = (err.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
            raise ToolError(f"docker {args[0]} failed: {why}")
        return out.decode(errors="replace").strip()

    async def container(self, workspace: Path) -> str:
        """The running container of this workspace, created on first use."""
        name = "chatgate-" + hashlib.sha256(str(workspace).encode()).hexdigest()[:16]
        await self.start()
        async with self._lock:
            state = await self._docker(
                "inspect", "--format", "{{.State.Running}}", name, check=False
            )
            if state == "false":
                await self._docker("start", name)
            elif state != "true":
                await self._docker(
                    "run",
                    "--detach",
                    "--name",
                    name,
                    "--label",
                    f"{LABEL}={workspace}",
                    "--init",
                    "--network",
                    "bridge" if self._network else "none",
                    "--memory",
                    f"{self._limits.memory_mb}m",
                    "--cpus",
                    f"{self._cfg.cpus:g}",
                    "--pids-limit",
                    str(self._limits.max_processes),
                    "--cap-drop",
                    "ALL",
                    "--security-opt",
                    "no-new-privileges",
                    "--volume",
                    f"{workspace}:{workspace}",
                    "--workdir",
                    str(workspace),
                    self._cfg.image,
                    "sleep",
                    "infinity",
                )
            self._last_used[name] = time.monotonic()
        return name

    async def _remove(self, name: str) -> None:
        self._last_used.pop(name, None)
        with contextlib.suppress(Exception):
            await self._docker("rm", "--force", name, check=False)

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(min(self._cfg.idle_seconds / 2, 30.0))
            now = time.monotonic()
            for name, used in list(self._last_used.items()):
                if now - used > self._cfg.idle_seconds:
                    log.info("docker container idle, removing name=%s", name)
                    await self._remove(name)

    async def spawn(
        self,
        argv: Sequence[str],
        *,
        workspace: Path,
        cwd: Path,
        env: Mapping[str, str],
        timeout: float,  # noqa: ASYNC109 - also enforced inside the container
        stdin: bool = False,
        split_stderr: bool = False,
        pins: Sequence[tuple[str, str]] = (),
    ) -> Running:
        # `pins` were checked by the caller just before (`run_command`): the workspace is
        # bind-mounted from this machine; nothing here runs on the host to check them later.
        name = await self.container(workspace)
        pidfile = new_pidfile()
        inner = wrapped(
            argv,
            pidfile=pidfile,
            directory=str(cwd),
            timeout=timeout,
            limits=self._limits,
            env=portable(env),
        )
        proc = await asyncio.create_subprocess_exec(
            self._cli,
            "exec",
            "--interactive",
            name,
            *inner,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE if split_stderr else asyncio.subprocess.STDOUT,
            start_new_session=True,
            env=client_env(),
        )

        async def stop_inside(command: str) -> None:
            await self._docker("exec", name, "sh", "-c", command, check=False)

        return RemoteProcess(proc, stop_inside, pidfile)
