"""The shell tool: run a bash command in the chat's workspace on the configured terminal
backend (tools/terminal/). `classify` judges each call: allow runs it, ask waits for a
person's approval in the chat (the prompt says where it will run), block never runs it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import Field

import gateway
import tools
from gateway.config import Settings, ToolsSettings, config_secrets_files
from gateway.tooling import ApprovalNeed, ToolContext, ToolError, ToolSpec
from tools.args import ToolArgs
from tools.shell_readonly import read_only
from tools.shellsafety import ShellPolicy, Verdict, classify
from tools.shellsafety.shape import exact
from tools.skills import bundled_skills_dir
from tools.terminal.base import DRAIN_SECONDS, KILL_GRACE, TerminalBackend, run_command
from tools.terminal.env import safe_env
from tools.workspace import Workspace

__all__ = [
    "ShellArgs",
    "ShellPolicy",
    "Verdict",
    "classify",
    "gateway_paths",
    "safe_env",
    "shell_tools",
]

log = logging.getLogger(__name__)

GROUP = "runtime"
WorkspaceFor = Callable[[ToolContext], Workspace]

DESCRIPTION = (
    "Run a bash command in the workspace; returns output and exit code. Each call is a fresh "
    "shell with empty stdin (use cwd or `cd x && ...`, and -y flags). Destructive commands "
    "(rm -r, force push, kill -9, DROP TABLE, curl | sh ...) wait for a person's approval; "
    "a few (rm -rf /, mkfs, shutdown) are blocked. Background processes end with the call."
)
_WHERE = {
    "sandbox": " Sandboxed: only the workspace is writable{net}.",
    "docker": " In a container; only the workspace is shared{net}.",
    "ssh": " Runs on a remote host.",
    "local": "",
}


class ShellArgs(ToolArgs):
    command: str = Field(min_length=1, description="The bash command line to run.")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before it is stopped (capped by the gateway)."
    )
    cwd: str | None = Field(
        default=None,
        description="Directory to run in, relative to the workspace (default: the workspace root).",
    )


def shell_tools(
    workspace_for: WorkspaceFor,
    settings: ToolsSettings,
    backend: TerminalBackend | None,
    *,
    secrets: Callable[[], Iterable[str]] | None = None,
    protected: Iterable[tuple[str, str, bool]] = (),
    workspace_root: Path | None = None,
) -> list[ToolSpec[Any]]:
    """The shell tool on `backend`; none when there is no backend (the sandbox cannot run
    here and unsandboxed commands are not allowed). `protected`: the gateway's own places
    (see `gateway_paths`) commands may not write, delete or (the secret ones) read without
    asking; `workspace_root`: where every chat's workspace lives."""
    if backend is None:
        return []
    policy = ShellPolicy.compile(
        allow=settings.shell_extra_allow,
        ask=settings.shell_extra_ask,
        block=settings.shell_extra_block,
        protected_paths=protected,
        workspace=str(workspace_root) if workspace_root else "",
    )
    limit = settings.shell_timeout
    passthrough = settings.terminal.env_passthrough

    def where(args: ShellArgs, workspace: Workspace) -> Path:
        path = workspace.resolve(args.cwd) if args.cwd else workspace.root
        if not path.is_dir():
            raise ToolError(f"cwd {args.cwd!r} is not a directory in the workspace.")
        return path

    def judge(args: ShellArgs, cwd: Path) -> Verdict:
        if "\x00" in args.command:
            raise ToolError("the command contains a NUL byte; remove it.")
        return classify(args.command, policy=policy, cwd=str(cwd))

    async def approval(args: ShellArgs, ctx: ToolContext) -> ApprovalNeed | None:
        workspace = workspace_for(ctx)
        cwd = where(args, workspace)
        verdict = judge(args, cwd)
        if verdict.action != "ask":
            return None  # allow runs; block is refused by the handler without asking anyone
        return ApprovalNeed(
            summary=args.command,
            reason=verdict.reason,
            shape=verdict.shape,
            cwd=workspace.relative(cwd),
            where=backend.describe(),
        )

    async def side_effects(args: ShellArgs, ctx: ToolContext) -> ApprovalNeed | None:
        """After outside content entered the turn: every command but a read-only one asks."""
        if read_only(args.command):
            return None
        workspace = workspace_for(ctx)
        cwd = where(args, workspace)
        verdict = judge(args, cwd)
        if verdict.action == "block":
            return None  # refused by the handler; nobody is asked
        return ApprovalNeed(
            summary=args.command,
            reason="",
            shape=verdict.shape or exact(args.command),
            cwd=workspace.relative(cwd),
            where=backend.describe(),
        )

    async def shell(args: ShellArgs, ctx: ToolContext) -> str:
        workspace = workspace_for(ctx)
        cwd = where(args, workspace)
        # Checked again here: the handler must never rely on the approval step alone.
        verdict = judge(args, cwd)
        if verdict.action == "block":
            log.warning("shell blocked session=%s reason=%r", ctx.session, verdict.reason)
            raise ToolError(
                f"refused: {verdict.reason}. This command is blocked and cannot be approved; "
                "find a safer way or ask the user to run it themselves."
            )
        timeout = min(args.timeout or limit, limit)
        env = safe_env(secrets() if secrets else (), passthrough=passthrough)
        result = await run_command(
            backend,
            args.command,
            workspace=workspace.root,
            cwd=cwd,
            env=env,
            timeout=timeout,
            max_chars=settings.max_output_chars,
        )
        log.info(
            "shell ran session=%s backend=%s verdict=%s exit=%s timed_out=%s",
            ctx.session,
            backend.name,
            verdict.action,
            result.exit_code,
            result.timed_out,
        )
        return result.render(timeout)

    net = "" if settings.terminal.network else ", no network"
    return [
        ToolSpec(
            name="shell",
            description=DESCRIPTION + _WHERE.get(backend.name, "").format(net=net),
            args=ShellArgs,
            handler=shell,
            group=GROUP,
            approval=approval,
            side_effects=side_effects,
            # Our own timeout and stop must fire before the agent gives up on the call.
            timeout=limit + KILL_GRACE + DRAIN_SECONDS + 15,
        )
    ]


def gateway_paths(settings: Settings) -> list[tuple[str, str, bool]]:
    """The gateway's own places as (absolute path, label, reading it exposes secrets):
    its data directory and store, the skills read into every prompt, its config, its code."""
    data = settings.data_dir.expanduser().resolve()
    places: list[tuple[Path, str, bool]] = [
        (data, "the gateway's data directory", True),
        (data / "chatgate.db", "the gateway's store (every chat's history)", True),
        (data / "skills", "installed skills, read into every chat's prompt", False),
        (bundled_skills_dir(), "bundled skills, read into every chat's prompt", False),
        *(
            (Path(p).resolve(), "the gateway's code", False)
            for p in (*gateway.__path__, *tools.__path__)
        ),
    ]
    # The file the gateway was started with (`--config` or CHATGATE_CONFIG), then the
    # environment files beside it.
    files = config_secrets_files(settings)
    if files:
        config, *env_files = files
        places.append((config, "the gateway's config file", True))
        places += [(path, "the gateway's environment file", True) for path in env_files]
    return [(str(path), label, secret) for path, label, secret in places]
