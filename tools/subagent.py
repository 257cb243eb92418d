"""Sub-agent delegation: the agent hands a self-contained task to a child agent loop.

The child gets a fresh history (so a long investigation does not flood the parent's
context), only the tools the policy allows sub-agents, no way to delegate further or
to talk to the person, and its own iteration and time limits. Approvals still apply:
a destructive call from a sub-agent waits for the same person's Approve in the chat.
Several delegate calls in one reply run in parallel.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field

from gateway.agent import Agent
from gateway.config import Settings
from gateway.llm.client import LLMClient
from gateway.llm.errors import LLMError
from gateway.tooling import ApprovalGate, ToolCatalog, ToolContext, ToolError, ToolScope, ToolSpec
from gateway.untrusted import PROMPT as UNTRUSTED_PROMPT
from tools.args import ToolArgs

GROUP = "subagent"
# Tools a sub-agent never gets: it cannot ask the person anything or spawn more agents.
_NEVER = {"delegate", "clarify"}

SUBAGENT_PROMPT = f"""\
You are a sub-agent working for another assistant, not for a person. Do the task you are \
given with the tools you have, then reply with a concise report: what you did, what you \
found (with file paths, commands and URLs where relevant), and anything left undone. You \
cannot ask questions; if something is ambiguous, make a reasonable choice and say so.

{UNTRUSTED_PROMPT}"""


class DelegateArgs(ToolArgs):
    task: str = Field(description="The task, self-contained: the sub-agent sees nothing else.")
    context: str = Field(default="", description="Facts from this conversation it needs.")


def subagent_tools(
    *,
    llm: LLMClient,
    catalog: ToolCatalog,
    settings: Settings,
    approvals: ApprovalGate | None,
) -> list[ToolSpec[Any]]:
    limits = settings.agent.model_copy(
        update={
            "max_iterations": settings.agent.subagent_max_iterations,
            "max_turn_seconds": settings.agent.subagent_max_seconds,
        }
    )
    agent = Agent(llm, limits, approvals=approvals)

    async def delegate(args: DelegateArgs, ctx: ToolContext) -> str:
        if ctx.is_subagent:
            raise ToolError("a sub-agent cannot delegate; do the task yourself.")
        if ctx.scope is not None:  # the turn's profile and models
            scope = dataclasses.replace(ctx.scope, is_subagent=True)
        else:
            scope = ToolScope(
                platform=ctx.chat.platform,
                chat_id=ctx.chat.chat_id,
                provider=settings.llm.provider_name,
                model=settings.llm.model,
                is_subagent=True,
            )
        tools = [t for t in catalog.for_scope(scope) if t.name not in _NEVER]
        brief = args.task.strip()
        if args.context.strip():
            brief += f"\n\nContext:\n{args.context.strip()}"
        try:
            result = await agent.run(
                SUBAGENT_PROMPT,
                [{"role": "user", "content": brief}],
                tools,
                dataclasses.replace(ctx, is_subagent=True, scope=scope),
                catalog=catalog,
                llm=ctx.llm,
            )
        except LLMError as exc:
            raise ToolError(f"the sub-agent could not run: {exc.user_message}") from None
        note = f" (stopped at its {result.limit_hit} limit)" if result.limit_hit else ""
        return (
            f"Sub-agent report{note}, {result.iterations} steps, {result.tool_calls} tool "
            f"calls:\n{result.text}"
        )

    return [
        ToolSpec(
            name="delegate",
            description=(
                "Hand a self-contained task to a sub-agent with its own fresh context and "
                "tools; it returns a report. Use it for research or multi-step work whose "
                "details you do not need to keep; call it several times at once to work "
                "in parallel."
            ),
            args=DelegateArgs,
            handler=delegate,
            group=GROUP,
            # The child has its own wall-time limit; allow a little for the report.
            timeout=settings.agent.subagent_max_seconds + 15,
        )
    ]
