"""`[tools.terminal]`: where shell commands and execute_code scripts run (tools/shell/terminal/)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from gateway.config.base import DAY, MINUTE, WEEK, Section


class SandboxTerminalSettings(Section):
    # When the gateway runs as root, sandboxed commands run as this unprivileged user.
    user: str = "nobody"
    # Extra host paths the sandbox sees read-only (a toolchain in /nix, /srv/data, ...).
    ro_paths: list[Path] = []


class LocalTerminalSettings(Section):
    # When the gateway runs as root, commands run as this unprivileged user (required then:
    # without it the local backend is not offered to a root gateway).
    user: str = ""


class SSHTerminalSettings(Section):
    host: str = ""
    user: str = ""  # empty: the gateway user's name
    port: int = Field(default=22, ge=1, le=65535)
    key_file: Path | None = None  # empty: ssh's default identities
    remote_dir: str = ""  # commands run here (relative to the remote home when not absolute)
    known_hosts: Path | None = None  # default ~/.ssh/known_hosts; unknown host keys are refused
    connect_timeout: float = Field(default=10.0, gt=0, le=5 * MINUTE)


class DockerTerminalSettings(Section):
    image: str = "python:3.12-slim"  # needs bash, coreutils' timeout, and python3 for code
    cpus: float = Field(default=1.0, gt=0, le=1024)
    idle_seconds: float = Field(default=600.0, gt=0, le=WEEK)  # a session's container goes then
    cli: str = "docker"  # the docker command (talks to the engine at DOCKER_HOST)


class ProcessSettings(Section):
    """The `process` tool (tools/shell/process_tool.py): commands that outlive the call."""

    max_per_chat: int = Field(default=3, ge=0, le=100)  # 0: the tool is not offered
    # Stopped when no call read, wrote to or listed it for this long.
    idle_seconds: float = Field(default=1800.0, gt=0, le=WEEK)
    max_seconds: float = Field(default=DAY, gt=0, le=WEEK)  # stopped after running this long
    output_bytes: int = Field(default=65536, ge=1024, le=64 * 1024 * 1024)  # kept per process


class TerminalSettings(Section):
    """Where shell commands and execute_code scripts run (tools/shell/terminal/)."""

    backend: Literal["sandbox", "local", "ssh", "docker"] = "sandbox"
    network: bool = False  # sandbox and docker: off means no network at all, not even 127.0.0.1
    # When the sandbox (or docker) cannot run here, fall back to the local backend instead of
    # offering no shell at all.
    allow_unsandboxed: bool = False
    cpu_seconds: int = Field(default=120, ge=1, le=int(DAY))  # CPU time per process
    memory_mb: int = Field(default=2048, ge=16, le=1 << 20)  # per process (RLIMIT_DATA), 1 TiB
    max_processes: int = Field(default=256, ge=8, le=100_000)  # of the user running commands
    # Environment variables passed to commands besides PATH, HOME, LANG, LC_*, TERM, TZ, ...
    env_passthrough: list[str] = []
    # execute_code: wall time of a script (time spent in its tool calls is not counted).
    code_timeout: float = Field(default=120.0, gt=0, le=DAY)
    code_max_tool_calls: int = Field(default=50, ge=0, le=10_000)
    # execute_code approval: auto asks unless the backend isolates (sandbox, docker).
    code_approval: Literal["auto", "always", "never"] = "auto"
    python: str = "python3"  # interpreter execute_code runs, found on the backend's PATH
    sandbox: SandboxTerminalSettings = SandboxTerminalSettings()
    local: LocalTerminalSettings = LocalTerminalSettings()
    ssh: SSHTerminalSettings = SSHTerminalSettings()
    docker: DockerTerminalSettings = DockerTerminalSettings()
    processes: ProcessSettings = ProcessSettings()

    @model_validator(mode="after")
    def _backend_needs(self) -> TerminalSettings:
        if self.backend == "ssh" and not self.ssh.host:
            raise ValueError("backend 'ssh' needs tools.terminal.ssh.host")
        return self
