"""Value types the LLM client returns; history always stays in native OpenAI message shape.

Whatever the server spoke (native tool calls or text markup), callers only ever see these.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

Message = dict[str, Any]
"""One OpenAI chat message (`role`, `content`, maybe `tool_calls` / `tool_call_id`)."""

OnText = Callable[[str], Awaitable[None]]
"""Receives the visible reply text while it streams."""


def new_call_id() -> str:
    """A fresh tool-call id, for servers and text formats that do not give one."""
    return f"call_{secrets.token_hex(12)}"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text as the model produced it; the caller validates it

    def to_message_part(self) -> dict[str, Any]:
        """The entry for an assistant message's `tool_calls` list."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True)
class Completion:
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    reasoning: str | None
    finish_reason: str | None
    usage: Usage

    def assistant_message(self) -> Message:
        """The native assistant message to append to history.

        Without tool calls the content is never null: several servers reject an
        assistant message whose content is null and that calls no tool.
        """
        if not self.tool_calls:
            return {"role": "assistant", "content": self.content or ""}
        return {
            "role": "assistant",
            "content": self.content,
            "tool_calls": [call.to_message_part() for call in self.tool_calls],
        }


class Completer(Protocol):
    """What the agent loop calls: one client (`LLMClient`) or a turn's models with fallback
    (`gateway.llm.fallback.ModelRoute`)."""

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        stream: bool | None = None,
        max_tokens: int | None = None,
        on_text: OnText | None = None,
        on_reasoning: OnText | None = None,
        temperature: float | None = None,
    ) -> Completion: ...
