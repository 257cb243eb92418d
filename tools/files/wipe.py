"""After `/forget`, offer to delete the files the chat's workspace still holds.

History and notes go at once; files may matter to people, so they are deleted only when the
person who sent /forget presses "Delete files" (the offer lasts an hour), or when an operator
ticks "with its files" on the console's /forget. Nothing is offered with the shared
workspace, whose files belong to every chat.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from typing import Any, Literal

from gateway.sdk import (
    Button,
    ButtonPress,
    CallbackData,
    ChatRef,
    CommandCall,
    Extensions,
    Outbound,
    PressReply,
    Store,
    ToolFamily,
    ToolSpec,
    keys,
)
from tools.files.workspaces import Usage, Workspaces

log = logging.getLogger(__name__)

OFFER_TTL = 3600.0
EXPIRED = "This offer has expired; files were kept."


@dataclass(frozen=True)
class WipeChoice(CallbackData, prefix="wipe"):
    token: str
    choice: Literal["yes", "no"]


class WorkspaceWipeOffer(ToolFamily):
    """A family without tools: the /forget hook, its buttons and the console's ChatFiles."""

    name = "workspace_wipe"

    def __init__(self, workspaces: Workspaces, store: Store) -> None:
        self._workspaces = workspaces
        self._store = store

    def specs(self) -> list[ToolSpec[Any]]:
        return []

    def register(self, extensions: Extensions) -> None:
        extensions.add_forget_hook(self.offer)
        extensions.add_buttons(WipeChoice, self.decide)
        extensions.set_chat_files(self)  # the console's /forget asks the operator instead

    # -- ChatFiles, for the operator console ------------------------------------------------

    def held(self, chat: ChatRef) -> str | None:
        if not self._workspaces.per_conversation:
            return None
        usage = self._workspaces.usage(chat)
        return _describe(usage) if usage.files else None

    def wipe(self, chat: ChatRef) -> str:
        removed = self._workspaces.wipe(chat)
        log.info("workspace wiped chat=%s files=%d", chat.address, removed.files)
        return f"Deleted {_describe(removed)} from the chat's workspace."

    async def offer(self, call: CommandCall) -> Outbound | None:
        chat = call.inbound.chat
        if not self._workspaces.per_conversation:
            return None
        usage = self._workspaces.usage(chat)
        if usage.files == 0:
            return None
        token = secrets.token_hex(6)
        offer = {"chat": chat.model_dump(mode="json"), "by": call.inbound.sender.address}
        await self._store.set(keys.wipe_offer(token), json.dumps(offer), ttl=OFFER_TTL)
        buttons = (
            (
                Button(label="Delete files", data=WipeChoice(token, "yes").pack(), style="danger"),
                Button(label="Keep them", data=WipeChoice(token, "no").pack()),
            ),
        )
        text = (
            f"This chat's workspace still holds {_describe(usage)}. Delete them too? "
            "(Only you can decide; the offer lasts an hour.)"
        )
        return Outbound(chat=chat, text=text, buttons=buttons)

    async def decide(self, press: ButtonPress, data: WipeChoice) -> PressReply:
        raw = await self._store.get(keys.wipe_offer(data.token))
        if raw is None:
            return PressReply(toast=EXPIRED, alert=True)
        offer = json.loads(raw)
        if press.user.address != offer["by"]:
            return PressReply(toast="Only the person who sent /forget can decide.", alert=True)
        # First answer wins: whoever deletes the offer decides; a second press finds none.
        if not await self._store.delete(keys.wipe_offer(data.token)):
            return PressReply(toast=EXPIRED, alert=True)
        if data.choice == "no":
            return PressReply(toast="Kept.", edit_text="The workspace files were kept.")
        chat = ChatRef.model_validate(offer["chat"])
        removed = self._workspaces.wipe(chat)
        log.info("workspace wiped chat=%s files=%d", chat.address, removed.files)
        return PressReply(
            toast="Deleted.", edit_text=f"Deleted {_describe(removed)} from this chat's workspace."
        )


def _describe(usage: Usage) -> str:
    size = usage.bytes
    amount = f"{size / 1_000_000:.1f} MB" if size >= 100_000 else f"{size / 1000:.0f} KB"
    return f"{usage.files} file(s), {amount}"
