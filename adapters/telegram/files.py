"""Attachment bytes fetched on demand: getFile (its size checked first), then the file URL
read in chunks and stopped past the limit. The Bot API serves files up to 20 MB to bots.
"""

from __future__ import annotations

from telegram import Bot
from telegram.error import BadRequest, TelegramError

from adapters.telegram.transport import AiohttpRequest
from gateway.sdk import AttachmentTooLarge, AttachmentUnavailable
from gateway.sdk.media import too_large

__all__ = ["AttachmentTooLarge", "AttachmentUnavailable", "download"]


async def download(bot: Bot, request: AiohttpRequest, file_id: str, max_bytes: int) -> bytes:
    try:
        file = await bot.get_file(file_id)
    except BadRequest as exc:
        if "too big" in exc.message.lower():
            raise AttachmentTooLarge("Telegram serves files up to 20 MB to bots") from None
        raise AttachmentUnavailable(f"Telegram refused the file: {exc.message}") from None
    except TelegramError as exc:
        raise AttachmentUnavailable(
            f"the file could not be fetched ({type(exc).__name__})"
        ) from None
    if file.file_size is not None and file.file_size > max_bytes:
        raise too_large(file.file_size, max_bytes)
    if not file.file_path:
        raise AttachmentUnavailable("Telegram gave no download path for the file")
    # getFile made file_path the full URL under telegram.api_url (with the bot token in it).
    return await request.download(file.file_path, max_bytes)
