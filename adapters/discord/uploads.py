"""Files sent as Discord message attachments: in the channel (replying to the message that
asked) or, for a slash command, as its interaction followup; the text is the message content.

Discord takes up to 10 files per message and, on a server without boosts, 10 MiB per file;
a larger file is refused by Discord with HTTP 413, reported as a DeliveryError.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable
from typing import Any

import aiohttp
import discord

from adapters.discord.interactions import InteractionReplies
from adapters.discord.normalize import channel_id
from adapters.discord.sending import MAX_LEN, MENTIONS, DiscordSender, delivery_error
from gateway.sdk import DeliveryError, Outbound, OutboundFile, SentRef

log = logging.getLogger(__name__)

MAX_UPLOAD_BYTES = 10 * 1024 * 1024
_FILES_PER_MESSAGE = 10
_TOKEN_GONE = {10015, 50027}  # Unknown Webhook, Invalid Webhook Token


class DiscordUploads:
    def __init__(
        self,
        client: Callable[[], discord.Client],
        replies: InteractionReplies,
        sender: DiscordSender,
    ) -> None:
        self._client = client
        self._replies = replies
        self._sender = sender

    async def send(self, out: Outbound) -> SentRef:
        content = out.text.strip()
        if len(content) > MAX_LEN:  # too long for one message: the text goes first, alone
            await self._sender.send(out.model_copy(update={"attachments": ()}))
            content = ""
        batches = [
            out.attachments[i : i + _FILES_PER_MESSAGE]
            for i in range(0, len(out.attachments), _FILES_PER_MESSAGE)
        ]
        message_id = ""
        for number, batch in enumerate(batches):
            text = content if number == 0 else ""
            message_id = await self._send_batch(out, text, batch, first=number == 0)
        return SentRef(chat=out.chat, message_id=message_id)

    async def _send_batch(
        self, out: Outbound, text: str, batch: tuple[OutboundFile, ...], *, first: bool
    ) -> str:
        pending = self._replies.get(out.reply_to)
        if pending is not None:
            try:
                message = await pending.interaction.followup.send(
                    text or discord.utils.MISSING,
                    files=_files(batch),
                    wait=True,
                    allowed_mentions=MENTIONS,
                )
            except discord.HTTPException as exc:
                if exc.code not in _TOKEN_GONE and exc.status != 401:
                    raise _upload_error(exc, out) from exc
                log.info("interaction token gone; uploading to the channel instead")
            except (aiohttp.ClientError, OSError) as exc:
                raise delivery_error(exc, out.chat, "upload") from exc
            else:
                self._replies.sent(pending, message.id)
                return str(message.id)
        channel = self._client().get_partial_messageable(channel_id(out.chat))
        reference: Any = None
        if first and out.reply_to and out.reply_to.isdigit():
            reference = discord.MessageReference(
                message_id=int(out.reply_to),
                channel_id=channel_id(out.chat),
                fail_if_not_exists=False,
            )
        try:
            sent = await channel.send(
                text or None, files=_files(batch), reference=reference, allowed_mentions=MENTIONS
            )
        except discord.HTTPException as exc:
            raise _upload_error(exc, out) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise delivery_error(exc, out.chat, "upload") from exc
        return str(sent.id)


def _files(batch: tuple[OutboundFile, ...]) -> list[discord.File]:
    # Fresh File objects per call: discord.py reads (and closes) them when it sends.
    return [discord.File(io.BytesIO(file.data), filename=file.name) for file in batch]


def _upload_error(exc: discord.HTTPException, out: Outbound) -> DeliveryError:
    if exc.status == 413 or exc.code == 40005:  # Request entity too large
        return DeliveryError(
            "Discord refused the file as too large for this server", permanent=True
        )
    return delivery_error(exc, out.chat, "upload")
