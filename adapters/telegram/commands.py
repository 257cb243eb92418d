"""The command menu Telegram shows (`setMyCommands`) and the answer to an unknown command."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from telegram import BotCommand

from gateway.sdk import (
    Admission,
    DeliveryError,
    Middleware,
    Next,
    Outbound,
    SentRef,
    Status,
    Submission,
    finished,
)

log = logging.getLogger(__name__)

_NAME = re.compile(r"^[a-z0-9_]{1,32}$")  # what setMyCommands accepts
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,32})(?:\s|$)")
# Telegram clients send /start when someone opens the bot; the gateway answers it with help.
_START = ("start", "start talking to me and see what I can do")


def menu(commands: list[tuple[str, str]]) -> list[BotCommand]:
    """The core's commands as Telegram's menu, /start first; names Telegram rejects are left out."""
    entries = [_START, *(c for c in commands if c[0] != _START[0])]
    return [
        BotCommand(name, (description or name)[:256])
        for name, description in entries
        if _NAME.match(name)
    ]


def unknown_command_answer(
    platform: str, send: Callable[[Outbound], Awaitable[SentRef]]
) -> Middleware:
    """An admission middleware for the `fallback` slot: a command the gateway does not know
    gets one line, not the model.

    It runs after the registered commands were answered, so any /command reaching it is
    unknown.
    """

    async def intercept(admission: Admission, call_next: Next) -> Submission:
        inbound = admission.inbound
        match = _COMMAND.match(inbound.text)
        if inbound.chat.platform != platform or inbound.attachments or match is None:
            return await call_next(admission)
        line = f"I don't know /{match.group(1)}. Send /help to see what I can do."
        try:
            await send(Outbound(chat=inbound.chat, text=line, reply_to=inbound.message_id))
        except DeliveryError as exc:
            log.warning(
                "unknown-command help not delivered chat=%s error=%s", inbound.chat.address, exc
            )
        return finished(Status.COMMAND, session=admission.session)

    return intercept
