"""The shell tool: run a bash command in the chat's workspace on the configured terminal
backend (tools/shell/terminal/). `classify` judges each call: allow runs it, ask waits for a
person's approval in the chat (the prompt says where it will run), block never runs it."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

import tools
from gateway.sdk import (
    CORE_PACKAGE_DIRS,
    ApprovalNeed,
    Settings,
    ToolContext,
    ToolError,
    ToolSpec,
    ToolsSettings,
    config_secrets_files,
    untrusted,
)
from tools.args import ToolArgs
from tools.files.workspace import Workspace
from tools.shell.exact import exact
from tools.shell.terminal.base import DRAIN_SECONDS, KILL_GRACE, TerminalBackend, run_command
from tools.shell.terminal.env import safe_env
from tools.skills.library import bundled_skills_dir

if TYPE_CHECKING:
    from tools.shell.safety import ShellPolicy, Verdict, classify

__all__ = [
    "ShellArgs",
    "ShellPolicy",
    "ShellTool",
    "Verdict",
    "classify",
    "gateway_paths",
    "safe_env",
]

log = logging.getLogger(__name__)


def __getattr__(name: str) -> Any:
    # The classifier (tree-sitter-bash and its rules, about 2.5 MB resident) loads with the
    # first command judged, not with the gateway.
    if name in ("ShellPolicy", "Verdict", "classify"):
        from tools.shell import safety

        return getattr(safety, name)
    raise AttributeError(name)


GROUP = "runtime"
_ASKED_KEPT = 1024
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


class ShellTool:
    """The shell tool on one terminal backend (TerminalTools offers it when there is one)."""

    def __init__(
        self,
        workspace_for: WorkspaceFor,
        settings: ToolsSettings,
        backend: TerminalBackend,
        *,
        secrets: Callable[[], Iterable[str]] | None = None,
        protected: Iterable[tuple[str, str, bool]] = (),
        workspace_root: Path | None = None,
    ) -> None:
        """`protected`: the gateway's own places (see `gateway_paths`) commands may not write,
        delete or (the secret ones) read without asking; `workspace_root`: where every chat's
        workspace lives."""
        self.workspace_for = workspace_for
        self.settings = settings
        self.backend = backend
        self.secrets = secrets
        self.protected = tuple(protected)
        self.workspace_root = workspace_root
        self.limit = settings.shell_timeout
        self.passthrough = settings.terminal.env_passthrough
        # The shape each command had when it was put to a person (or matched a standing
        # grant), by (turn, cwd, command): it runs only if it still has that shape.
        self._asked: OrderedDict[tuple[str, str, str], str] = OrderedDict()

    @cached_property
    def policy(self) -> ShellPolicy:
        """Compiled with the first command judged (the settings checked the patterns)."""
        from tools.shell.safety import ShellPolicy

        settings = self.settings
        return ShellPolicy.compile(
            allow=settings.shell_extra_allow,
            ask=settings.shell_extra_ask,
            block=settings.shell_extra_block,
            protected_paths=self.protected,
            workspace=str(self.workspace_root) if self.workspace_root else "",
        )

    def where(self, args: ShellArgs, workspace: Workspace) -> Path:
        path = workspace.resolve(args.cwd) if args.cwd else workspace.root
        if not path.is_dir():
            raise ToolError(f"cwd {args.cwd!r} is not a directory in the workspace.")
        return path

    def judge(self, args: ShellArgs, cwd: Path) -> Verdict:
        if "\x00" in args.command:
            raise ToolError("the command contains a NUL byte; remove it.")
        # The workspace is on this machine's disk (the sandbox and containers mount it), so
        # a symbolic link among the targets is resolved into the shape.
        from tools.shell.safety import classify

        return classify(args.command, policy=self.policy, cwd=str(cwd), resolve_links=True)

    async def approval(self, args: ShellArgs, ctx: ToolContext) -> ApprovalNeed | None:
        workspace = self.workspace_for(ctx)
        cwd = self.where(args, workspace)
        verdict = self.judge(args, cwd)
        if verdict.action != "ask":
            return None  # allow runs; block is refused by the handler without asking anyone
        self._remember(ctx, cwd, args.command, verdict.shape)
        return ApprovalNeed(
            summary=args.command,
            reason=verdict.reason,
            shape=verdict.shape,
            cwd=workspace.relative(cwd),
            where=self.backend.describe(),
            standing=verdict.standing,
        )

    async def side_effects(self, args: ShellArgs, ctx: ToolContext) -> ApprovalNeed | None:
        """After outside content entered the turn: every command but a read-only one asks."""
        if _read_only(args.command):
            return None
        workspace = self.workspace_for(ctx)
        cwd = self.where(args, workspace)
        verdict = self.judge(args, cwd)
        if verdict.action == "block":
            return None  # refused by the handler; nobody is asked
        self._remember(ctx, cwd, args.command, verdict.shape)
        return ApprovalNeed(
            summary=args.command,
            reason="",
            shape=verdict.shape or exact(args.command),
            cwd=workspace.relative(cwd),
            where=self.backend.describe(),
            standing=verdict.standing,
        )

    async def shell(self, args: ShellArgs, ctx: ToolContext) -> str:
        workspace = self.workspace_for(ctx)
        cwd = self.where(args, workspace)
        # Checked again here: the handler must never rely on the approval step alone.
        verdict = self.judge(args, cwd)
        if verdict.action == "block":
            log.warning("shell blocked session=%s reason=%r", ctx.session, verdict.reason)
            raise ToolError(
                f"refused: {verdict.reason}. This command is blocked and cannot be approved; "
                "find a safer way or ask the user to run it themselves."
            )
        self.confirm(ctx, cwd, args.command, verdict)
        full = workspace.over_quota()
        if full and not _read_only_or_freeing(args.command):
            raise ToolError(f"not run: {full} (rm, rmdir and reading commands still run).")
        timeout = min(args.timeout or self.limit, self.limit)
        env = safe_env(self.secrets() if self.secrets else (), passthrough=self.passthrough)
        from tools.files.outside_reads import outside_reads  # with the first command run

        # `grep -r x .` or `cat *` reads what people sent without naming its folder: what
        # the command opened there, not its text, decides whether the result is outside
        # content.
        async with outside_reads(workspace.root) as reads:
            result = await run_command(
                self.backend,
                args.command,
                workspace=workspace.root,
                cwd=cwd,
                env=env,
                timeout=timeout,
                max_chars=self.settings.max_output_chars,
                pins=verdict.pins,
                # At the quota only reading and removing run; below it, a command that
                # fills the workspace is stopped within a guard's period of passing it.
                guard=None if full or not workspace.quota_bytes else quota_guard(workspace),
            )
        if reads.first:
            untrusted.note_outside(ctx, f"shell read {reads.first}")
        log.info(
            "shell ran session=%s backend=%s verdict=%s exit=%s timed_out=%s",
            ctx.session,
            self.backend.name,
            verdict.action,
            result.exit_code,
            result.timed_out,
        )
        # A command may pass the quota by what it writes between two checks: the next one
        # is refused then.
        full = workspace.over_quota()
        note = f"\n[{full}; until then only rm, rmdir and reading commands run]" if full else ""
        return result.render(timeout) + note

    def confirm(self, ctx: ToolContext, cwd: Path, command: str, verdict: Verdict) -> None:
        """Refuse a command whose shape changed since it was put to a person: a target
        became (or stopped being) a symbolic link while they decided, so what they approved
        is not what would run."""
        asked = self._asked.pop((ctx.turn_id, str(cwd), command), None)
        if asked is not None and asked != verdict.shape:
            raise ToolError(
                "not run: what the command touches changed since it was approved (now: "
                f"{verdict.shape or 'nothing risky'}); call it again to have it judged as it is"
            )

    def _remember(self, ctx: ToolContext, cwd: Path, command: str, shape: str) -> None:
        self._asked[(ctx.turn_id, str(cwd), command)] = shape
        while len(self._asked) > _ASKED_KEPT:
            self._asked.popitem(last=False)  # asked and never run (denied, or the turn ended)

    def specs(self) -> list[ToolSpec[Any]]:
        net = "" if self.settings.terminal.network else ", no network"
        return [
            ToolSpec(
                name="shell",
                description=DESCRIPTION + _WHERE.get(self.backend.name, "").format(net=net),
                args=ShellArgs,
                handler=self.shell,
                group=GROUP,
                approval=self.approval,
                side_effects=self.side_effects,
                # Our own timeout and stop must fire before the agent gives up on the call.
                timeout=self.limit + KILL_GRACE + DRAIN_SECONDS + 15,
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
            for p in (*CORE_PACKAGE_DIRS, *tools.__path__)
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


def quota_guard(workspace: Workspace) -> Callable[[], Awaitable[str]]:
    """For `run_command`'s guard: why a running command must stop (the workspace passed
    its quota), or ""."""

    async def over() -> str:
        return await asyncio.to_thread(workspace.over_quota) or ""

    return over


def _read_only(command: str) -> bool:
    # The read-only list parses with the classifier's grammar: loaded with the first command.
    from tools.shell.readonly import read_only

    return read_only(command)


def _read_only_or_freeing(command: str) -> bool:
    from tools.shell.readonly import frees_space, read_only

    return read_only(command) or frees_space(command)
