"""send_message: the model sends a message to another chat: the admins (by default), a named
home channel or a chat the gateway knows, on any platform, each target checked first
(gateway/scheduling/targets.py)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field

from gateway.sdk import (
    DeliveryTargets,
    Outbound,
    Outbox,
    TargetError,
    ToolContext,
    ToolError,
    ToolFamily,
    ToolSpec,
)
from tools.args import ToolArgs

log = logging.getLogger(__name__)

GROUP = "cron"
MAX_TEXT = 4000

TARGET_HELP = (
    "Where to: empty or 'admins' for the admins' direct chats, a home channel's name (e.g. "
    "'team'), or a chat address like 'slack:C0123' or 'telegram:-100123'."
)


class SendMessageArgs(ToolArgs):
    text: str = Field(description="The message, as it should appear there.")
    to: str = Field(default="", description=TARGET_HELP)


class SendTools(ToolFamily):
    name = "send"

    def __init__(self, targets: DeliveryTargets | None, outbox: Outbox) -> None:
        self.targets = targets
        self.outbox = outbox

    async def send_message(self, args: SendMessageArgs, ctx: ToolContext) -> str:
        if self.targets is None:
            raise ToolError("sending to other chats is not available in this process")
        text = args.text.strip()
        if not text:
            raise ToolError("the message is empty")
        if len(text) > MAX_TEXT:
            raise ToolError(f"the message has {len(text):,} characters; keep it under {MAX_TEXT:,}")
        try:
            chats = await self.targets.resolve(args.to, user=ctx.user, here=ctx.chat)
        except TargetError as exc:
            raise ToolError(f"not sent: {exc}") from None
        sent, failed = [], []
        for chat in chats:
            try:
                await self.outbox.send(Outbound(chat=chat, text=text))
                sent.append(chat.address)
            except Exception as exc:  # one chat's failure must not hide the others'
                log.warning(
                    "send_message not delivered chat=%s by=%s error=%s",
                    chat.address,
                    ctx.user.address,
                    exc,
                )
                failed.append(f"{chat.address} ({exc})")
        if not sent:
            raise ToolError("not delivered to " + "; ".join(failed))
        result = "sent to " + ", ".join(sent)
        return result + (f"; not delivered to {'; '.join(failed)}" if failed else "")

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="send_message",
                description=(
                    "Send a message to another chat, on any platform: the admins (default), a "
                    "home channel by name, or a chat the gateway knows. To answer here, just "
                    "reply instead."
                ),
                args=SendMessageArgs,
                handler=self.send_message,
                group=GROUP,
                side_effects=True,
            )
        ]
