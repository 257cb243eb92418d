"""Builds the configured terminal backend from settings, with the fallback rules: when the
sandbox (or Docker) cannot run here, the local backend is used only if
`tools.terminal.allow_unsandboxed` is set; otherwise no shell is offered."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from gateway.sdk import Settings, config_secrets_files, started_config
from tools.shell.terminal.base import BackendUnavailable, Limits, TerminalBackend

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackendChoice:
    backend: TerminalBackend | None  # None: shell and execute_code are not offered
    notes: tuple[str, ...] = ()  # what went wrong on the way, one plain sentence each

    async def close(self) -> None:
        if self.backend is not None:
            await self.backend.close()

    @property
    def summary(self) -> str:
        if self.backend is None:
            return "no terminal: " + " ".join(self.notes)
        text = f"{self.backend.name} ({self.backend.describe()})"
        return f"{text}; " + " ".join(self.notes) if self.notes else text


def limits_from(settings: Settings) -> Limits:
    cfg = settings.tools.terminal
    return Limits(cfg.cpu_seconds, cfg.memory_mb, cfg.max_processes)


def hidden_paths(settings: Settings) -> list[Path]:
    """What a sandboxed command must never see: the data directory, home, and the config file
    the gateway was started with (`--config` or CHATGATE_CONFIG) with the env file beside it."""
    paths = [settings.data_dir, Path.home(), *config_secrets_files(settings)]
    config = started_config(settings)
    # Its own directory (/etc/chatgate) may hold more: keys, certificates. Not /etc itself.
    if config is not None and len(config.parent.parts) > 2:
        paths.append(config.parent)
    return [p.expanduser().resolve() for p in paths]


def build_backend(settings: Settings) -> BackendChoice:
    """The configured backend (probed: a sandbox that cannot start is reported here, at
    startup), or the local fallback, or none; logs which."""
    choice = _choose(settings)
    if choice.backend is not None:
        log.info("terminal backend=%s where=%r", choice.backend.name, choice.backend.describe())
    return choice


def _choose(settings: Settings) -> BackendChoice:
    cfg = settings.tools.terminal
    limits = limits_from(settings)
    notes: list[str] = []
    # Each backend is imported when chosen: only the configured one is loaded.
    try:
        if cfg.backend == "sandbox":
            from tools.shell.terminal.sandbox import SandboxBackend

            return BackendChoice(
                SandboxBackend(
                    limits,
                    network=cfg.network,
                    user=cfg.sandbox.user,
                    hide=hidden_paths(settings),
                    ro_paths=cfg.sandbox.ro_paths,
                )
            )
        if cfg.backend == "docker":
            from tools.shell.terminal.docker import DockerBackend

            return BackendChoice(DockerBackend(cfg.docker, limits, network=cfg.network))
        if cfg.backend == "ssh":
            from tools.shell.terminal.ssh import SSHBackend

            return BackendChoice(SSHBackend(cfg.ssh, limits, workspaces=settings.workspace))
    except BackendUnavailable as exc:
        if cfg.backend == "ssh" or not cfg.allow_unsandboxed:
            note = f"the {cfg.backend} backend cannot run here: {exc}."
            if cfg.backend != "ssh":
                note += (
                    " The shell and execute_code tools are off; fix that, or set "
                    "tools.terminal.allow_unsandboxed = true to run commands unsandboxed."
                )
            log.error("terminal unavailable: %s", note)
            return BackendChoice(None, (note,))
        notes.append(
            f"the {cfg.backend} backend cannot run here ({exc}); falling back to the local "
            "backend because tools.terminal.allow_unsandboxed is set."
        )
        log.warning("terminal fallback: %s", notes[-1])
    from tools.shell.terminal.local import LocalBackend

    try:
        return BackendChoice(LocalBackend(limits, user=cfg.local.user), tuple(notes))
    except BackendUnavailable as exc:
        notes.append(f"the local backend cannot run: {exc}. The shell tools are off.")
        log.error("terminal unavailable: %s", notes[-1])
        return BackendChoice(None, tuple(notes))
