"""The `process` tool: start a command that keeps running after the call (a dev server, a
build, a watcher) in the chat's workspace, read what it wrote so far, send it input, stop it.
Starting one is judged like a shell command (tools/shell/tool.py): allow, ask, or block."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.sdk import ApprovalNeed, ToolContext, ToolError, ToolSpec, untrusted
from tools.args import ToolArgs
from tools.files.outside_reads import OutsideReads
from tools.shell.processes import ManagedProcess, ProcessLimit, ProcessTable
from tools.shell.terminal.env import safe_env
from tools.shell.tool import GROUP, ShellArgs, ShellTool, quota_guard

log = logging.getLogger(__name__)

DESCRIPTION = (
    "Run a command that keeps going after this call (dev server, build, watcher): start it, "
    "read its output, send input, stop it, list this chat's. Starting is judged like shell. "
    "At most {cap} per chat; one unused for {idle} is stopped."
)
_FIRST_OUTPUT_SECONDS = 1.0  # how long start waits for a first line to show the model
_MAX_SECONDS_OF_WAIT = 30.0


class ProcessArgs(ToolArgs):
    action: Literal["start", "read", "input", "stop", "list"] = Field(
        description="start returns an id and the first output; read: output since the last read."
    )
    command: str = Field(default="", description="start: the bash command line.")
    cwd: str | None = Field(default=None, description="start: directory in the workspace.")
    id: str = Field(default="", description="read, input, stop: the process id from start.")
    text: str = Field(default="", description="input: text for its stdin (\\n ends a line).")
    wait: float = Field(
        default=0.0,
        ge=0,
        le=_MAX_SECONDS_OF_WAIT,
        description="read: seconds to wait for new output first (at most 30).",
    )

    @model_validator(mode="after")
    def _needs(self) -> ProcessArgs:
        if self.action == "start" and not self.command.strip():
            raise ValueError("action 'start' needs 'command'")
        if self.action in ("read", "input", "stop") and not self.id.strip():
            raise ValueError(f"action {self.action!r} needs 'id'")
        if self.action == "input" and not self.text:
            raise ValueError("action 'input' needs 'text'")
        return self

    def shell_args(self) -> ShellArgs:
        return ShellArgs(command=self.command, cwd=self.cwd)


class ProcessTool:
    """The process tool on the shell tool's backend, policy and environment."""

    def __init__(self, shell: ShellTool, table: ProcessTable) -> None:
        self.shell = shell
        self.table = table

    async def approval(self, args: ProcessArgs, ctx: ToolContext) -> ApprovalNeed | None:
        if args.action != "start":
            return None
        need = await self.shell.approval(args.shell_args(), ctx)
        return None if need is None else _kept_running(need)

    async def side_effects(self, args: ProcessArgs, ctx: ToolContext) -> ApprovalNeed | None:
        """After outside content: starting asks as the shell does; input asks every time."""
        if args.action == "start":
            need = await self.shell.side_effects(args.shell_args(), ctx)
            return None if need is None else _kept_running(need)
        if args.action == "input":
            proc = self.table.get(ctx.session.chat_scope, args.id)
            if proc is None:
                return None  # the handler says there is no such process
            return ApprovalNeed(
                summary=f"send to {proc.id} ({proc.command}): {args.text!r}",
                reason="",
                standing=False,
            )
        return None

    async def process(self, args: ProcessArgs, ctx: ToolContext) -> str:
        if args.action == "start":
            return await self.start(args, ctx)
        if args.action == "list":
            procs = self.table.of_chat(ctx.session.chat_scope)
            for proc in procs:
                proc.touched = time.monotonic()
            return "\n".join(p.line() for p in procs) or "No processes in this chat."
        proc = self._find(args, ctx)
        if args.action == "read":
            return self._marked(proc, ctx, await self.read(proc, args.wait))
        if args.action == "input":
            return await self.send(proc, args.text)
        await self.table.stop(proc, "stopped by the agent")
        fresh, missed = proc.output.read_new()
        return self._marked(proc, ctx, _render(proc, fresh, missed))

    @staticmethod
    def _marked(proc: ManagedProcess, ctx: ToolContext, output: str) -> str:
        """`output`, after marking the turn if the process read files people sent."""
        read = proc.outside.check() if proc.outside is not None else ""
        if read:
            untrusted.note_outside(ctx, f"process {proc.id} read {read}")
        return output

    async def start(self, args: ProcessArgs, ctx: ToolContext) -> str:
        shell_args = args.shell_args()
        workspace = self.shell.workspace_for(ctx)
        cwd = self.shell.where(shell_args, workspace)
        verdict = self.shell.judge(shell_args, cwd)  # again: never rely on the approval alone
        if verdict.action == "block":
            raise ToolError(
                f"refused: {verdict.reason}. This command is blocked and cannot be approved."
            )
        self.shell.confirm(ctx, cwd, args.command, verdict)
        full = workspace.over_quota()
        if full:
            raise ToolError(f"not started: {full}.")
        env = safe_env(
            self.shell.secrets() if self.shell.secrets else (), passthrough=self.shell.passthrough
        )
        backend = self.shell.backend

        async def spawn() -> Any:
            return await backend.spawn(
                ["bash", "-c", args.command],
                workspace=workspace.root,
                cwd=cwd,
                env=env,
                timeout=self.table.max_seconds,
                stdin=True,
                pins=verdict.pins,
            )

        # What it opens among the files people sent marks the turn that reads its output.
        outside = OutsideReads(workspace.root)
        guard = quota_guard(workspace) if workspace.quota_bytes else None
        try:
            proc = await self.table.add(
                ctx.session.chat_scope,
                workspace.root,
                args.command,
                spawn,
                outside=outside,
                guard=guard,
            )
        except ProcessLimit as exc:
            outside.close()
            raise ToolError(str(exc)) from None
        except BaseException:
            outside.close()
            raise
        log.info(
            "process started session=%s id=%s backend=%s verdict=%s",
            ctx.session,
            proc.id,
            backend.name,
            verdict.action,
        )
        return self._marked(proc, ctx, await self.read(proc, _FIRST_OUTPUT_SECONDS, settle=True))

    async def read(self, proc: ManagedProcess, wait: float, *, settle: bool = False) -> str:
        """What `proc` wrote since the last read, waiting up to `wait` seconds for something
        (with `settle`, the whole `wait` unless it exits: the first lines of a start)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while loop.time() < deadline and proc.alive:
            if not settle and proc.output.total > proc.output.read_to:
                break
            await asyncio.sleep(0.05)
        if not proc.alive and proc.reader is not None:
            await asyncio.wait({proc.reader}, timeout=0.5)  # the last words of one that exited
        fresh, missed = proc.output.read_new()
        return _render(proc, fresh, missed)

    async def send(self, proc: ManagedProcess, text: str) -> str:
        stdin = proc.running.stdin
        if not proc.alive or stdin is None or stdin.is_closing():
            raise ToolError(f"{proc.id} is not running ({proc.status()}); nothing was sent.")
        try:
            stdin.write(text.encode())
            await asyncio.wait_for(stdin.drain(), 10)
        except (OSError, TimeoutError) as exc:
            raise ToolError(f"could not write to {proc.id}: {exc}") from None
        return f"Sent {len(text)} character(s) to {proc.id}."

    def _find(self, args: ProcessArgs, ctx: ToolContext) -> ManagedProcess:
        proc = self.table.get(ctx.session.chat_scope, args.id)
        if proc is None:
            known = ", ".join(p.id for p in self.table.of_chat(ctx.session.chat_scope)) or "none"
            raise ToolError(f"no process {args.id!r} in this chat (this chat's: {known}).")
        return proc

    def spec(self) -> ToolSpec[Any]:
        return ToolSpec(
            name="process",
            description=DESCRIPTION.format(
                cap=self.table.max_per_chat, idle=_idle(self.table.idle_seconds)
            ),
            args=ProcessArgs,
            handler=self.process,
            group=GROUP,
            approval=self.approval,
            side_effects=self.side_effects,
            timeout=_MAX_SECONDS_OF_WAIT + 30,
            progress=_progress,
        )


def _kept_running(need: ApprovalNeed) -> ApprovalNeed:
    """The shell's approval, saying that the command keeps running after the call."""
    reason = need.reason or "it changes things"
    return ApprovalNeed(
        summary=need.summary,
        reason=f"{reason}; it keeps running in the background",
        shape=need.shape,
        cwd=need.cwd,
        where=need.where,
        standing=need.standing,
    )


def _render(proc: ManagedProcess, fresh: str, missed: int) -> str:
    lost = f"[... {missed:,} earlier bytes were not kept ...]\n" if missed else ""
    body = fresh.rstrip("\n") or "(no new output)"
    return f"[{proc.id}: {proc.status()}]\n{lost}{body}"


def _progress(args: ProcessArgs) -> str:
    if args.action == "start":
        return f"Starting `{args.command}`"
    return f"Process {args.id}: {args.action}" if args.id else "Listing processes"


def _idle(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
