"""`chatgate doctor` checks for the terminal: which backend runs commands (or why none does),
whether it answers, and whether the workspace and data directory are laid out safely."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gateway.sdk import CheckResult, Settings, ToolError, started_config
from tools.shell.terminal.base import run_command
from tools.shell.terminal.env import safe_env
from tools.shell.terminal.factory import build_backend
from tools.shell.terminal.local import LocalBackend
from tools.shell.terminal.process import RunAs
from tools.shell.terminal.ssh import SSHBackend


async def terminal_checks(settings: Settings) -> list[CheckResult]:
    results = [*_layout(settings)]
    choice = build_backend(settings)
    backend = choice.backend
    if backend is None:
        results.append(
            CheckResult(
                "terminal",
                False,
                choice.summary,
                "install bubblewrap and allow user namespaces, pick another "
                "tools.terminal.backend, or set tools.terminal.allow_unsandboxed = true",
            )
        )
        return results
    try:
        if isinstance(backend, SSHBackend):
            results.append(await _probe(backend, settings))
        else:
            results.append(CheckResult("terminal", True, choice.summary))
        if isinstance(backend, LocalBackend):
            results.extend(_local_limits(backend))
        if isinstance(backend, LocalBackend) and backend.run_as is not None:
            results.extend(_private_to_gateway(settings, backend.run_as))
    finally:
        await choice.close()
    return results


async def _probe(backend: SSHBackend, settings: Settings) -> CheckResult:
    workspace = settings.workspace
    try:
        result = await run_command(
            backend,
            "true",
            workspace=workspace,
            cwd=workspace,
            env=safe_env(),
            timeout=settings.tools.terminal.ssh.connect_timeout + 5,
            max_chars=2000,
        )
    except ToolError as exc:
        return CheckResult("terminal", False, str(exc), "check tools.terminal.ssh.*")
    if result.exit_code != 0:
        detail = f"{backend.describe()}: remote_dir unusable ({result.output.strip()[:200]})"
        return CheckResult("terminal", False, detail, "create tools.terminal.ssh.remote_dir")
    return CheckResult("terminal", True, f"ssh ({backend.describe()}), connected")


def _local_limits(backend: LocalBackend) -> list[CheckResult]:
    """What the local backend does not keep apart, said plainly: one user for every chat, and
    (without Landlock) the gateway's other processes."""
    who = backend.run_as.name if backend.run_as else "the gateway's own user"
    out = [
        CheckResult(
            "terminal",
            True,
            f"the local backend runs every chat's commands as one user ({who}): one chat's "
            "commands can read and change every other chat's workspace (the sandbox backend "
            "keeps chats apart)",
        )
    ]
    for gap in backend.confinement_gaps():
        out.append(CheckResult("terminal", False, gap, "use the sandbox, or a newer kernel"))
    return out


def _layout(settings: Settings) -> list[CheckResult]:
    out: list[CheckResult] = []
    data = settings.data_dir.expanduser().resolve()
    workspace = settings.workspace
    old = data / "workspace"
    if settings.tools.workspace is None and old.is_dir() and any(old.iterdir()):
        out.append(
            CheckResult(
                "workspace",
                False,
                f"files are left in the old workspace {old}; the workspace is now {workspace}",
                f"mv {old} {workspace}  (or set tools.workspace)",
            )
        )
    if workspace == data or workspace.is_relative_to(data):
        out.append(
            CheckResult(
                "workspace",
                False,
                f"the workspace {workspace} is inside the data directory {data}",
                "set tools.workspace to a directory outside the data directory",
            )
        )
    return out


def _private_to_gateway(settings: Settings, user: RunAs) -> list[CheckResult]:
    """A root gateway runs commands as `user`: that user must not read the data or config."""
    out = []
    paths = [settings.data_dir.expanduser().resolve()]
    config = started_config(settings)
    if config is not None:
        paths.append(config)
    for path in paths:
        if path.exists() and _readable_by(path, user):
            out.append(
                CheckResult(
                    "terminal",
                    False,
                    f"{path} is readable by {user.name}, who runs the commands",
                    f"chmod go-rwx {path}",
                )
            )
    return out


def _readable_by(path: Path, user: RunAs) -> bool:
    groups = set(os.getgrouplist(user.name, user.gid))
    for part in [*reversed(path.parents), path]:
        info = part.stat()
        need = stat.S_IROTH if part == path else stat.S_IXOTH
        if info.st_uid == user.uid:
            need <<= 6
        elif info.st_gid in groups:
            need <<= 3
        if not info.st_mode & need:
            return False
    return True
