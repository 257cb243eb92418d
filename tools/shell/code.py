"""execute_code: the model writes one Python script that runs on the terminal backend and may
call the session's other tools, so a multi-step job costs one model round trip.

Each call from the script takes the agent's own path (gateway.turn.agent.execute_tool): only tools
the policy allows in the turn's scope (chat, agent profile, provider, model), argument
validation, approval when the tool asks for it.
Limits: wall time (time spent inside tool calls not counted), output size, number of calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets as secrets_module
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

from gateway.sdk import (
    ApprovalGate,
    ApprovalNeed,
    Settings,
    ToolCatalog,
    ToolContext,
    ToolError,
    ToolSpec,
    execute_tool,
    untrusted,
)
from tools.args import ToolArgs
from tools.scope import call_scope
from tools.shell.exact import exact
from tools.shell.terminal.base import (
    DRAIN_SECONDS,
    GUARD_SECONDS,
    KILL_GRACE,
    OutputBuffer,
    Running,
    RunResult,
    TerminalBackend,
    pump,
)
from tools.shell.terminal.env import safe_env
from tools.shell.tool import GROUP, WorkspaceFor, quota_guard

log = logging.getLogger(__name__)

BOOT = Path(__file__).with_name("terminal").joinpath("code_boot.py").read_text(encoding="utf-8")
MAX_SCRIPT_CHARS = 100_000  # one argv element must stay under the kernel's 128 KiB
# Never callable from a script: no scripts inside scripts, no sub-agents.
_NEVER = {"execute_code", "delegate"}

DESCRIPTION = (
    "Run a Python 3 script in the workspace that can call your other tools: "
    "tools.read_file(path='a.txt') returns the tool's text; a failure raises ToolCallError. "
    "Chains many calls in one step; returns the output and the calls made."
)


class CodeArgs(ToolArgs):
    code: str = Field(min_length=1, description="The Python 3 script.")
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before it is stopped (capped by the gateway)."
    )


@dataclass
class _Calls:
    made: list[tuple[str, bool]] = field(default_factory=list)
    seconds: float = 0.0  # time spent inside tool calls
    since: float | None = None  # start of the call in progress

    def render(self) -> str:
        if not self.made:
            return "[tool calls: none]"
        parts = [f"{name} {'ok' if ok else 'error'}" for name, ok in self.made]
        return f"[tool calls ({len(parts)}): {', '.join(parts)}]"


class ExecuteCode:
    """The execute_code tool on one terminal backend (TerminalTools offers it when there is
    one); a script's tool calls go to the tools `catalog` allows in the chat."""

    def __init__(
        self,
        workspace_for: WorkspaceFor,
        settings: Settings,
        backend: TerminalBackend,
        *,
        catalog: ToolCatalog,
        approvals: ApprovalGate | None,
        secrets: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.workspace_for = workspace_for
        self.settings = settings
        self.backend = backend
        self.catalog = catalog
        self.approvals = approvals
        self.secrets = secrets
        self.term = term = settings.tools.terminal
        self.limit = term.code_timeout
        self.ask = term.code_approval == "always" or (
            term.code_approval == "auto" and not backend.isolated
        )

    def allowed(self, ctx: ToolContext) -> dict[str, ToolSpec[Any]]:
        # The turn's own scope: a script gets no tool its agent profile denies the agent.
        scope = call_scope(ctx, self.settings)
        return {t.name: t for t in self.catalog.for_scope(scope) if t.name not in _NEVER}

    def need(self, args: CodeArgs, reason: str) -> ApprovalNeed:
        # The shape is the script itself: "for this session" covers this script, no other.
        return ApprovalNeed(
            summary=args.code, reason=reason, shape=exact(args.code), where=self.backend.describe()
        )

    async def approval(self, args: CodeArgs, ctx: ToolContext) -> ApprovalNeed | None:
        return self.need(args, "runs a Python script that is not sandboxed") if self.ask else None

    async def side_effects(self, args: CodeArgs, ctx: ToolContext) -> ApprovalNeed | None:
        return self.need(args, "")  # a script can do anything: after outside content, it asks

    async def call_tool(self, request: dict[str, Any], ctx: ToolContext, calls: _Calls) -> str:
        name = str(request.get("tool", ""))
        if len(calls.made) >= self.term.code_max_tool_calls:
            calls.made.append((name, False))
            return _answer(
                request,
                False,
                f"the limit of {self.term.code_max_tool_calls} tool calls per script is reached",
            )
        tools = self.allowed(ctx)
        spec = tools.get(name)
        if spec is None:
            calls.made.append((name, False))
            if self.catalog.get(name) is not None:
                why = f"the tool '{name}' is not allowed here"
            else:
                why = f"there is no tool named '{name}'. Available: {', '.join(sorted(tools))}"
            return _answer(request, False, why)
        args = request.get("args")
        if not isinstance(args, dict):
            args = {}
        loop = asyncio.get_running_loop()
        calls.since = loop.time()
        try:
            result = await execute_tool(
                spec,
                args,
                ctx,
                approvals=self.approvals,
                timeout=spec.timeout or self.settings.agent.tool_timeout,
            )
        finally:
            calls.seconds += loop.time() - calls.since
            calls.since = None
        ok = not result.startswith("error: ")
        calls.made.append((name, ok))
        return _answer(request, ok, result if ok else result.removeprefix("error: "))

    async def serve(
        self, running: Running, token: bytes, ctx: ToolContext, buffer: OutputBuffer, calls: _Calls
    ) -> None:
        """Read the script's stderr: marked lines are tool calls, the rest is output."""
        assert running.stderr is not None and running.stdin is not None
        mark = b"\x1e" + token + b" "
        while line := await _read_line(running.stderr):
            if not line.startswith(mark):
                buffer.feed(line)
                continue
            try:
                request = json.loads(line[len(mark) :])
            except ValueError:
                request = {}
            if not isinstance(request, dict):
                request = {}
            answer = await self.call_tool(request, ctx, calls)
            try:
                running.stdin.write(answer.encode() + b"\n")
                await running.stdin.drain()
            except (ConnectionError, RuntimeError):
                return  # the script is gone

    async def execute_code(self, args: CodeArgs, ctx: ToolContext) -> str:
        if len(args.code) > MAX_SCRIPT_CHARS:
            raise ToolError(
                f"the script is {len(args.code):,} characters; the limit is "
                f"{MAX_SCRIPT_CHARS:,}. Write it to a file and run it with the shell instead."
            )
        workspace = self.workspace_for(ctx)
        full = workspace.over_quota()
        if full:
            raise ToolError(f"not run: {full} (the shell's rm still runs).")
        timeout = min(args.timeout or self.limit, self.limit)
        token = secrets_module.token_hex(16)
        env = safe_env(
            self.secrets() if self.secrets else (), passthrough=self.term.env_passthrough
        )
        env["CHATGATE_RPC_TOKEN"] = token
        env["PYTHONUNBUFFERED"] = "1"
        from tools.files.outside_reads import outside_reads  # with the first script run

        # A script that walks the workspace reads what people sent without naming it.
        async with outside_reads(workspace.root) as reads:
            running = await self.backend.spawn(
                [self.term.python, "-I", "-c", BOOT, args.code],
                workspace=workspace.root,
                cwd=workspace.root,
                env=env,
                timeout=timeout,
                stdin=True,
                split_stderr=True,
            )
            buffer = OutputBuffer(self.settings.tools.max_output_chars)
            calls = _Calls()
            readers = [
                asyncio.create_task(pump(running.stdout, buffer)),
                asyncio.create_task(self.serve(running, token.encode(), ctx, buffer, calls)),
            ]
            timed_out, stopped = False, ""
            guard = quota_guard(workspace) if workspace.quota_bytes else None
            try:
                timed_out, stopped = await _finished(running, timeout, calls, guard)
                await running.stop()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.gather(*readers), DRAIN_SECONDS)
            finally:
                await asyncio.shield(running.stop())
                for reader in readers:
                    reader.cancel()
                await asyncio.gather(*readers, return_exceptions=True)
        if reads.first:
            untrusted.note_outside(ctx, f"execute_code read {reads.first}")
        result = RunResult(buffer.render(), running.returncode, timed_out, stopped)
        log.info(
            "execute_code ran session=%s backend=%s exit=%s timed_out=%s calls=%d",
            ctx.session,
            self.backend.name,
            result.exit_code,
            timed_out,
            len(calls.made),
        )
        return f"{result.render(timeout)}\n{calls.render()}"

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="execute_code",
                description=DESCRIPTION,
                args=CodeArgs,
                handler=self.execute_code,
                group=GROUP,
                approval=self.approval,
                side_effects=self.side_effects,
                # Calls inside the script (and their approvals) do not count against its own
                # limit; the agent's limit must leave room for one approval wait at least.
                timeout=self.limit
                + self.settings.approvals.timeout_seconds
                + self.settings.agent.tool_timeout
                + KILL_GRACE
                + 15,
            )
        ]


async def _finished(
    running: Running,
    timeout: float,  # noqa: ASYNC109 - the script's own time, not its tool calls'
    calls: _Calls,
    guard: Callable[[], Awaitable[str]] | None,
) -> tuple[bool, str]:
    """Wait until the script exits: (its own time ran out, why its guard stopped it)."""
    loop = asyncio.get_running_loop()
    started = guarded = loop.time()
    while running.returncode is None:
        now = loop.time()
        in_call = now - calls.since if calls.since is not None else 0.0
        if now - started - calls.seconds - in_call >= timeout:
            return True, ""
        if guard is not None and now - guarded >= GUARD_SECONDS:
            guarded = now
            if why := await guard():
                return False, why
        await asyncio.sleep(0.02)
    return False, ""


async def _read_line(stream: asyncio.StreamReader) -> bytes:
    """One line however long (a request may carry a whole file); b"" at the end."""
    parts: list[bytes] = []
    while True:
        try:
            parts.append(await stream.readuntil(b"\n"))
        except asyncio.IncompleteReadError as exc:
            parts.append(exc.partial)
        except asyncio.LimitOverrunError as exc:
            parts.append(await stream.readexactly(exc.consumed))
            continue
        return b"".join(parts)


def _answer(request: dict[str, Any], ok: bool, text: str) -> str:
    key = "result" if ok else "error"
    return json.dumps({"id": request.get("id"), "ok": ok, key: text})
