"""Media on WhatsApp: downloads (GET /{media-id} for a short-lived URL, then that URL with the
token) and uploads (POST /{phone-number-id}/media, whose id the message then names)."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from adapters.whatsapp.graph import GraphClient
from gateway.sdk import AttachmentUnavailable, DeliveryError, OutboundFile
from gateway.sdk.media import read_limited, too_large


class WhatsAppMedia:
    def __init__(self, graph: GraphClient, phone_number_id: str) -> None:
        self._graph = graph
        self._phone = phone_number_id

    async def download(self, media_id: str, max_bytes: int) -> bytes:
        try:
            info = await self._graph.get(media_id)
        except DeliveryError as exc:
            raise AttachmentUnavailable(f"WhatsApp would not give the file: {exc}") from None
        size = info.get("file_size")
        if isinstance(size, int) and size > max_bytes:
            raise too_large(size, max_bytes)
        url = info.get("url")
        if not isinstance(url, str) or not self._graph.trusted_media_url(url):
            raise AttachmentUnavailable("WhatsApp gave no download address for the file")
        try:
            response = await self._graph.download(url, max_bytes)
            async with response:
                if response.status != 200:
                    # Media URLs last five minutes; an expired one answers 404.
                    raise AttachmentUnavailable(f"WhatsApp's media host answered {response.status}")
                return await read_limited(response, max_bytes)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise AttachmentUnavailable(
                f"the file could not be fetched ({type(exc).__name__})"
            ) from None

    async def upload(self, file: OutboundFile) -> str:
        """The media id of the uploaded file (WhatsApp keeps it for 30 days)."""
        result = await self._graph.post_form(f"{self._phone}/media", _form(file))
        media_id = result.get("id")
        if not isinstance(media_id, str) or not media_id:
            raise DeliveryError("WhatsApp returned no media id for the upload")
        return media_id


def _form(file: OutboundFile) -> Callable[[], aiohttp.FormData]:
    mime = file.mime_type.split(";", 1)[0].strip() or "application/octet-stream"

    def build() -> aiohttp.FormData:
        form = aiohttp.FormData()
        form.add_field("messaging_product", "whatsapp")
        form.add_field("type", mime)
        form.add_field("file", file.data, filename=file.name, content_type=mime)
        return form

    return build
