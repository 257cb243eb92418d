"""The read_channel tool: the model asks for more of the conversation it is in (the channel's or
thread's earlier messages), read with the bot's own permissions on that platform.

It reads only the chat the turn is in, so nobody reaches a channel through the bot that the
bot's answer would not go to anyway; what it returns is other people's words, outside content.
It is offered only on platforms whose adapter can read history (Slack, Discord; Telegram's Bot
API cannot).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.sdk import DeliveryError, Outbox, ToolContext, ToolFamily, ToolScope, ToolSpec
from tools.args import ToolArgs

GROUP = "session"
MAX_MESSAGES = 100


class ReadChannelArgs(ToolArgs):
    messages: int = Field(
        default=30, ge=1, le=MAX_MESSAGES, description="How many of the newest messages to read."
    )


class ReadChannelTools(ToolFamily):
    """read_channel, through the adapters that can read history (ReadsHistory)."""

    name = "read_channel"

    def __init__(self, outbox: Outbox, *, max_chars: int) -> None:
        self.outbox = outbox
        self.max_chars = max_chars

    async def read_channel(self, args: ReadChannelArgs, ctx: ToolContext) -> str:
        chat = ctx.chat
        try:
            lines = await self.outbox.read_history(
                chat, max_messages=args.messages, max_chars=self.max_chars
            )
        except DeliveryError as exc:
            return f"error: the conversation could not be read: {exc}"
        if lines is None:
            return f"error: {chat.platform} does not let the bot read earlier messages."
        if not lines:
            return "No earlier messages could be read here."
        return "\n".join(lines)

    def unavailable(self, scope: ToolScope) -> str | None:
        if self.outbox.reads_history(scope.platform):
            return None
        # Where no adapter runs (`chatgate tools list`) nothing can be read either.
        return f"no running {scope.platform} adapter can read earlier messages"

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="read_channel",
                description=(
                    "Read the newest messages of this conversation (the channel, or the thread "
                    "you are in), oldest first, as 'Name: text' lines: use it when the person "
                    "refers to something said earlier that you do not have."
                ),
                args=ReadChannelArgs,
                handler=self.read_channel,
                group=GROUP,
                untrusted_output=True,  # other people's words
                progress=lambda args: "Reading the conversation",
                unavailable=self.unavailable,
            )
        ]
