"""Sub-agent delegation: the agent hands self-contained tasks to child agent loops.

Each child gets a fresh history (so a long investigation does not flood the parent's
context), only the tools the policy allows sub-agents, no way to talk to the person, and its
own iteration, token and time limits. One call may carry a batch of up to
`delegation.max_parallel` tasks, run at once; the reports come back together with a status
per task, and a child that fails or runs out of time never fails the others. Children may
delegate again only while `delegation.max_depth` allows. Approvals still apply: a destructive
call from a child waits for a person's Approve in the chat, which says which sub-task asked.
With `background=true` the call returns at once with a task id per task, and each report
comes back to the chat later (tools/agent/background.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from pydantic import Field, model_validator

from gateway.sdk import (
    Agent,
    ApprovalGate,
    Extensions,
    LLMClient,
    LLMError,
    Settings,
    ToolCatalog,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
    TurnTimeout,
    untrusted,
)
from tools.agent.background import BackgroundTasks
from tools.args import ToolArgs
from tools.scope import call_scope

log = logging.getLogger(__name__)

GROUP = "subagent"
DELEGATE = "delegate"
# Tools a sub-agent never gets: it cannot ask the person anything.
_NEVER = ("clarify",)
_GRACE = 10.0  # seconds past a child's own limit before it is stopped from outside

SUBAGENT_PROMPT = f"""\
You are a sub-agent working for another assistant, not for a person. Do the task you are \
given with the tools you have, then reply with a concise report: what you did, what you \
found (with file paths, commands and URLs where relevant), and anything left undone. You \
cannot ask questions; if something is ambiguous, make a reasonable choice and say so.

{untrusted.PROMPT}"""


@dataclass(frozen=True)
class SubTask:
    task: str
    context: str = ""


class DelegateArgs(ToolArgs):
    task: str = Field(default="", description="One task, self-contained: it sees nothing else.")
    tasks: list[str] = Field(
        default_factory=list, description="Or several independent tasks, run at once."
    )
    context: str = Field(default="", description="Facts from this conversation they need.")
    background: bool = Field(
        default=False,
        description=(
            "Return at once with a task id; the report arrives in the chat later as a new "
            "message from you, while the conversation goes on."
        ),
    )

    @model_validator(mode="after")
    def _one_kind(self) -> DelegateArgs:
        self.tasks = [t for t in self.tasks if t.strip()]
        if bool(self.task.strip()) == bool(self.tasks):
            raise ValueError("give either 'task' (one) or 'tasks' (a list), not both or neither")
        return self

    def batch(self) -> list[SubTask]:
        return [SubTask(t, self.context) for t in self.tasks or [self.task]]


@dataclass(frozen=True)
class ChildReport:
    status: str  # "done", "stopped at its <x> limit", "timed out", "failed: ..."
    text: str = ""
    steps: int = 0
    tool_calls: int = 0

    @property
    def ok(self) -> bool:
        return not self.status.startswith(("failed", "timed out"))


class DelegateTools(ToolFamily):
    """The delegate tool. Children run on `llm` (given none, on a client of its own, closed
    with the family) and ask `approvals` for destructive calls (none: nobody is asked)."""

    name = "delegate"

    def __init__(
        self,
        *,
        llm: LLMClient | None,
        catalog: ToolCatalog,
        settings: Settings,
        approvals: ApprovalGate | None,
        background: BackgroundTasks | None = None,
    ) -> None:
        """`background`: where background tasks run and are recorded (None: not offered)."""
        self.background = background
        self.own_llm = llm is None
        self.llm = LLMClient(settings.llm) if llm is None else llm
        self.catalog = catalog
        self.settings = settings
        self.delegation = delegation = settings.delegation
        self.seconds = seconds = settings.agent.subagent_max_seconds
        limits = settings.agent.model_copy(
            update={
                "max_iterations": settings.agent.subagent_max_iterations,
                "max_turn_seconds": seconds,
                "max_tokens_per_turn": delegation.max_tokens_per_task,
            }
        )
        self.agent = Agent(self.llm, limits, approvals=approvals)

    def register(self, extensions: Extensions) -> None:
        if self.background is not None:
            self.background.register(extensions)

    async def start(self) -> None:
        if self.background is not None:
            await self.background.start()

    async def close(self) -> None:
        if self.background is not None:
            await self.background.close()
        if self.own_llm:
            await self.llm.aclose()

    async def run_child(self, sub: SubTask, ctx: ToolContext, label: str) -> ChildReport:
        depth = _depth(ctx) + 1
        scope = call_scope(ctx, self.settings, subagent=True)  # the turn's profile and models
        never = _NEVER if depth < self.delegation.max_depth else (*_NEVER, DELEGATE)
        brief = sub.task.strip()
        if sub.context.strip():
            brief += f"\n\nContext:\n{sub.context.strip()}"
        child = dataclasses.replace(
            ctx, is_subagent=True, depth=depth, task_label=label, scope=scope
        )
        try:
            async with asyncio.timeout(self.seconds + _GRACE):
                result = await self.agent.run(
                    SUBAGENT_PROMPT,
                    [{"role": "user", "content": brief}],
                    self.catalog.toolbox(scope, exclude=never),
                    child,
                    catalog=self.catalog,
                    llm=ctx.llm,
                )
        except (TimeoutError, TurnTimeout):
            return ChildReport(f"timed out after {self.seconds:g} s")
        except LLMError as exc:
            return ChildReport(f"failed: {exc.user_message}")
        except Exception as exc:  # a child's crash must not take its siblings down
            log.exception("sub-agent crashed session=%s task=%s", ctx.session, label)
            return ChildReport(f"failed: {type(exc).__name__}")
        status = f"stopped at its {result.limit_hit} limit" if result.limit_hit else "done"
        return ChildReport(status, result.text, result.iterations, result.tool_calls)

    async def delegate(self, args: DelegateArgs, ctx: ToolContext) -> str:
        if _depth(ctx) >= self.delegation.max_depth:
            raise ToolError("a sub-agent at this depth cannot delegate; do the task yourself.")
        batch = args.batch()
        if len(batch) > self.delegation.max_parallel:
            raise ToolError(
                f"at most {self.delegation.max_parallel} tasks at once; send the rest in "
                "another call."
            )
        if args.background:
            return await self.send_off(batch, ctx)
        if len(batch) == 1:
            report = await self.run_child(batch[0], ctx, "sub-task")
            if not report.ok:
                raise ToolError(f"the sub-agent {report.status}.")
            note = "" if report.status == "done" else f" ({report.status})"
            return (
                f"Sub-agent report{note}, {report.steps} steps, {report.tool_calls} tool "
                f"calls:\n{report.text}"
            )
        labels = [f"sub-task {i}/{len(batch)} ({_short(s.task)})" for i, s in enumerate(batch, 1)]
        reports = await asyncio.gather(
            *(self.run_child(sub, ctx, label) for sub, label in zip(batch, labels, strict=True))
        )
        done = sum(r.ok for r in reports)
        parts = [f"Sub-agent reports: {done} of {len(batch)} tasks finished."]
        for i, (sub, report) in enumerate(zip(batch, reports, strict=True), 1):
            parts.append(
                f"\n## Task {i}: {_short(sub.task)}\nStatus: {report.status}"
                + (f", {report.steps} steps, {report.tool_calls} tool calls" if report.ok else "")
                + (f"\n{report.text}" if report.text else "")
            )
        return "\n".join(parts)

    async def send_off(self, batch: list[SubTask], ctx: ToolContext) -> str:
        """Start each task in the background; their reports come back to the chat."""
        tasks = self.background
        if tasks is None or not tasks.available or self.delegation.max_background_per_chat < 1:
            raise ToolError("background tasks are not available here; delegate without it.")
        if ctx.is_subagent:
            raise ToolError("a sub-agent cannot start background tasks; delegate without it.")
        lines = []
        for sub in batch:
            label = _short(sub.task)

            async def work(child: ToolContext, sub: SubTask = sub) -> tuple[bool, str]:
                report = await self.run_child(sub, child, child.task_label)
                return report.ok, _report_text(report)

            try:
                record = await tasks.launch(ctx, label, work)
            except ValueError as exc:
                lines.append(f"Not started ({label}): {exc}")
                continue
            lines.append(f"Started background task {record.id}: {label}")
        lines.append(
            "Each report will arrive in the chat as a new message from you when it is done; "
            "the person can list or cancel tasks with /tasks. Do not wait for it."
        )
        return "\n".join(lines)

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name=DELEGATE,
                description=(
                    "Hand self-contained work to sub-agents with fresh contexts; each returns a "
                    f"report. Up to {self.delegation.max_parallel} tasks run at once. For research "
                    "or multi-step work whose details you need not keep."
                ),
                args=DelegateArgs,
                handler=self.delegate,
                group=GROUP,
                # The children have their own wall-time limit; allow a little for the reports.
                timeout=self.seconds + _GRACE + 5,
            )
        ]


def _report_text(report: ChildReport) -> str:
    note = "" if report.status == "done" else f" ({report.status})"
    steps = f", {report.steps} steps, {report.tool_calls} tool calls" if report.ok else ""
    return f"Sub-agent report{note}{steps}:\n{report.text}".rstrip()


def _depth(ctx: ToolContext) -> int:
    return max(ctx.depth, 1 if ctx.is_subagent else 0)


def _short(task: str, limit: int = 60) -> str:
    line = " ".join(task.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
