"""Fetching the bytes of an attachment through the adapter that owns it, and bounded reads.

Only the owning adapter's `FileSource.download` is ever asked (the platform's own file API,
with the bot's credentials); a handle is never fetched as a URL by the core.
"""

from __future__ import annotations

import aiohttp

from gateway.sdk.channels import AttachmentTooLarge, AttachmentUnavailable, FileSource, Outbox
from gateway.sdk.messages import Attachment, ChatRef


async def fetch(outbox: Outbox, chat: ChatRef, attachment: Attachment, max_bytes: int) -> bytes:
    """The bytes of an attachment sent in `chat`, from its platform; AttachmentError when
    they cannot be had (too large, unknown, the platform offers no downloads). The size the
    platform declared is checked first, the bytes again while they arrive."""
    if attachment.size is not None and attachment.size > max_bytes:
        raise too_large(attachment.size, max_bytes)
    source = outbox.adapter(chat.platform) if outbox.has(chat.platform) else None
    if not isinstance(source, FileSource):
        raise AttachmentUnavailable(f"files sent on {chat.platform} cannot be fetched")
    return await source.download(attachment.file_id, max_bytes)


def too_large(size: int, max_bytes: int) -> AttachmentTooLarge:
    return AttachmentTooLarge(
        f"the file has {size:,} bytes; the limit is {max_bytes:,} (media.max_download_mb)"
    )


async def read_limited(response: aiohttp.ClientResponse, max_bytes: int) -> bytes:
    """The body of a download, refused before reading when Content-Length is over the limit
    and stopped as soon as more than `max_bytes` arrived."""
    declared = response.content_length
    if declared is not None and declared > max_bytes:
        raise too_large(declared, max_bytes)
    chunks: list[bytes] = []
    got = 0
    async for chunk in response.content.iter_chunked(1 << 16):
        got += len(chunk)
        if got > max_bytes:
            raise AttachmentTooLarge(
                f"the file has more than {max_bytes:,} bytes (media.max_download_mb)"
            )
        chunks.append(chunk)
    return b"".join(chunks)
