"""Attachment bytes fetched on demand (getFile, then the file URL), with a size limit.

The size from getFile is checked before downloading; the Bot API serves at most 20 MB,
so a file whose size Telegram does not state is bounded by that and checked after.
"""

from __future__ import annotations

from telegram import Bot
from telegram.error import BadRequest, TelegramError

from gateway.channels import AttachmentError


class AttachmentTooLarge(AttachmentError):
    """The file is bigger than the caller allowed (or than the Bot API serves)."""


class AttachmentUnavailable(AttachmentError):
    """Telegram would not give the file (expired or unknown file id, network failure)."""


async def download(bot: Bot, file_id: str, max_bytes: int) -> bytes:
    try:
        file = await bot.get_file(file_id)
        if file.file_size is not None and file.file_size > max_bytes:
            raise AttachmentTooLarge(
                f"the file has {file.file_size:,} bytes; the limit is {max_bytes:,}"
            )
        data = bytes(await file.download_as_bytearray())
    except BadRequest as exc:
        if "too big" in exc.message.lower():
            raise AttachmentTooLarge("Telegram serves files up to 20 MB to bots") from None
        raise AttachmentUnavailable(f"Telegram refused the file: {exc.message}") from None
    except TelegramError as exc:
        # Never the exception text of the download itself: its URL carries the bot token.
        raise AttachmentUnavailable(
            f"the file could not be fetched ({type(exc).__name__})"
        ) from None
    if len(data) > max_bytes:
        raise AttachmentTooLarge(f"the file has {len(data):,} bytes; the limit is {max_bytes:,}")
    return data
