"""The tool scope a call runs in: the turn's own (its profile, provider and model, set when
the turn was planned), so the agent, execute_code's scripts and sub-agents share one policy."""

from __future__ import annotations

import dataclasses

from gateway.sdk import Settings, ToolContext, ToolScope


def call_scope(ctx: ToolContext, settings: Settings, *, subagent: bool = False) -> ToolScope:
    """The scope whose tools this call may use; `subagent` for the tools a child agent gets.

    Only a call outside any planned turn (no `ctx.scope`) falls back to the chat with the
    default provider and model and no agent profile."""
    is_subagent = subagent or ctx.is_subagent
    if ctx.scope is not None:
        if ctx.scope.is_subagent or not is_subagent:
            return ctx.scope
        return dataclasses.replace(ctx.scope, is_subagent=True)
    return ToolScope(
        platform=ctx.chat.platform,
        chat_id=ctx.chat.chat_id,
        provider=settings.llm.provider_name,
        model=settings.llm.model,
        is_subagent=is_subagent,
    )
