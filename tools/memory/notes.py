"""The memory tool: the model keeps durable notes about the chat and the person."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.sdk import (
    MemoryBook,
    MemoryEditError,
    MemoryScope,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
)
from tools.args import ToolArgs

GROUP = "memory"


class MemoryArgs(ToolArgs):
    action: Literal["add", "replace", "remove", "list"]
    target: MemoryScope = Field(
        default=MemoryScope.CHAT,
        description="'chat' for facts about this chat or team, 'user' for facts about the person.",
    )
    text: str = Field(default="", description="The note to add, or the new text for replace.")
    old_text: str = Field(
        default="", description="For replace/remove: a unique part of the existing note."
    )

    @model_validator(mode="after")
    def _needs(self) -> MemoryArgs:
        if self.action in ("add", "replace") and not self.text.strip():
            raise ValueError(f"'{self.action}' needs 'text'")
        if self.action in ("replace", "remove") and not self.old_text.strip():
            raise ValueError(f"'{self.action}' needs 'old_text' naming the note to change")
        return self


class MemoryTools(ToolFamily):
    """The memory tool on the gateway's memory book (`book`)."""

    name = "memory"

    def __init__(self, memory: MemoryBook) -> None:
        self.book = memory

    async def memory(self, args: MemoryArgs, ctx: ToolContext) -> str:
        scope, chat, user = args.target, ctx.chat, ctx.user
        try:
            if args.action == "add":
                notes = await self.book.add(scope, chat, user, args.text)
            elif args.action == "replace":
                notes = await self.book.replace(scope, chat, user, args.old_text, args.text)
            elif args.action == "remove":
                notes = await self.book.remove(scope, chat, user, args.old_text)
            else:
                notes = await self.book.entries(scope, chat, user)
        except MemoryEditError as exc:
            raise ToolError(str(exc)) from None
        used = sum(len(n) for n in notes)
        listing = "\n".join(f"- {n}" for n in notes) or "(none)"
        return f"{scope.value} memory ({used}/{self.book.budget(scope)} chars):\n{listing}"

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="memory",
                description=(
                    "Keep durable notes across conversations: preferences, names, decisions. "
                    "Notes are shown to you at the start of each new conversation. "
                    "Actions: add, replace (old_text -> text), remove (old_text), list."
                ),
                args=MemoryArgs,
                handler=self.memory,
                group=GROUP,
                # Notes are read into every later conversation: outside content must not write them.
                side_effects=True,
            )
        ]
