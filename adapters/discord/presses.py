"""Answering a button press inside Discord's 3 seconds: ask the core, then edit or refuse.

A refusal (`PressReply.alert`) is an ephemeral message to the presser and leaves the buttons;
an outcome replaces the message text and removes the buttons.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

import discord

from gateway.sdk import ButtonPress, HandlePress, PressReply

log = logging.getLogger(__name__)

# Past this the press is deferred (an "update" defer: no visible change, 15 more minutes).
ANSWER_WITHIN = 2.0
FAILED = PressReply(toast="That did not work; please try again.", alert=True)


async def answer_press(
    interaction: discord.Interaction[Any], press: ButtonPress, handle: HandlePress
) -> None:
    task = asyncio.ensure_future(handle(press))
    done, _ = await asyncio.wait({task}, timeout=ANSWER_WITHIN)
    if not done:
        await _quietly(interaction.response.defer(), press)
    try:
        reply = await task
    except Exception:
        log.exception("button press handler failed data=%s", press.data)
        reply = FAILED
    await show(interaction, reply, press)


async def show(
    interaction: discord.Interaction[Any], reply: PressReply, press: ButtonPress
) -> None:
    deferred = interaction.response.is_done()
    if reply.alert or reply.edit_text is None:
        if deferred:
            await _quietly(interaction.followup.send(reply.toast, ephemeral=True), press)
        else:
            await _quietly(interaction.response.send_message(reply.toast, ephemeral=True), press)
        return
    text = reply.edit_text[:2000]
    if deferred:
        await _quietly(interaction.edit_original_response(content=text, view=None), press)
    else:
        await _quietly(interaction.response.edit_message(content=text, view=None), press)


async def _quietly(call: Awaitable[object], press: ButtonPress) -> None:
    # The decision is already recorded by the core; a lost acknowledgement is only cosmetic.
    try:
        await call
    except discord.HTTPException as exc:
        log.warning(
            "button press answer failed chat=%s status=%s error=%r",
            press.chat.address,
            exc.status,
            exc.text,
        )
