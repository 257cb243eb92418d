"""Files through the homeserver's media repository (`mxc://`): downloads, decrypted where the
room is encrypted, and uploads sent as `m.image` / `m.audio` / `m.video` / `m.file` events.

The access token goes only to the configured homeserver (authenticated media,
`/_matrix/client/v1/media/download`); an `mxc://` URL of another server is fetched through it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp
from nio import AsyncClient, UploadResponse
from nio.crypto.attachments import decrypt_attachment, encrypt_attachment

from adapters.matrix.normalize import ENCRYPTED_FILE, EncryptedFile
from adapters.matrix.sending import MatrixSender, relates_to
from gateway.sdk import (
    AttachmentKind,
    AttachmentUnavailable,
    DeliveryError,
    Outbound,
    OutboundFile,
    SentRef,
)
from gateway.sdk.media import read_limited

_DOWNLOAD = aiohttp.ClientTimeout(total=120, sock_connect=10)
_MSGTYPES = {
    AttachmentKind.IMAGE: "m.image",
    AttachmentKind.AUDIO: "m.audio",
    AttachmentKind.VOICE: "m.audio",
    AttachmentKind.VIDEO: "m.video",
}


class MatrixFiles:
    def __init__(self, client: AsyncClient, sender: MatrixSender, *, max_bytes: int) -> None:
        self._client = client
        self._sender = sender
        self._max_bytes = max_bytes
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def download(self, file_id: str, max_bytes: int | None) -> bytes:
        limit = min(max_bytes or self._max_bytes, self._max_bytes)
        encrypted = EncryptedFile.unpack(file_id) if file_id.startswith(ENCRYPTED_FILE) else None
        mxc = encrypted.url if encrypted else file_id
        data = await self._fetch(mxc, limit)
        if encrypted is None:
            return data
        try:
            return bytes(decrypt_attachment(data, encrypted.key, encrypted.sha256, encrypted.iv))
        except Exception as exc:  # nio raises EncryptionError, or binascii/ValueError on bad keys
            raise AttachmentUnavailable(
                f"the encrypted file could not be decrypted ({type(exc).__name__})"
            ) from None

    async def upload(self, out: Outbound, *, encrypted: bool) -> SentRef:
        """The text (if any) as a message, then each file as an event of its own."""
        ref: SentRef | None = None
        if out.text.strip():
            ref = await self._sender.send(out.model_copy(update={"attachments": ()}))
        for file in out.attachments:
            if file.size > self._max_bytes:
                raise DeliveryError(
                    f"the file {file.name} has {file.size:,} bytes; the limit is "
                    f"{self._max_bytes:,} (matrix.max_file_bytes)",
                    permanent=True,
                )
            content = await self._file_content(file, encrypted=encrypted)
            relation = relates_to(out.chat, out.reply_to if ref is None else None)
            if relation:
                content["m.relates_to"] = relation
            event_id = await self._sender.send_event(out.chat, "m.room.message", content)
            ref = SentRef(chat=out.chat, message_id=event_id)
        assert ref is not None  # an Outbound with attachments has at least one
        return ref

    async def _file_content(self, file: OutboundFile, *, encrypted: bool) -> dict[str, Any]:
        data, keys = encrypt_attachment(file.data) if encrypted else (file.data, None)
        try:
            response, _ = await self._client.upload(
                lambda _got, _timeouts: data,
                content_type="application/octet-stream" if encrypted else file.mime_type,
                filename=file.name,
                filesize=len(data),
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"Matrix upload failed ({type(exc).__name__})") from None
        if not isinstance(response, UploadResponse):
            raise DeliveryError(f"Matrix refused the upload: {response}")
        msgtype = _MSGTYPES.get(file.kind, "m.file")
        content: dict[str, Any] = {
            "msgtype": msgtype,
            "body": file.name,
            "filename": file.name,
            "info": {"mimetype": file.mime_type, "size": file.size},
        }
        if file.kind is AttachmentKind.VOICE:
            content["org.matrix.msc3245.voice"] = {}
        if keys is not None:
            content["file"] = {**keys, "url": response.content_uri, "mimetype": file.mime_type}
        else:
            content["url"] = response.content_uri
        return content

    async def _fetch(self, mxc: str, limit: int) -> bytes:
        parts = urlsplit(mxc)
        media_id = parts.path.strip("/")
        if parts.scheme != "mxc" or not parts.netloc or not media_id or "/" in media_id:
            raise AttachmentUnavailable("not a Matrix media address (mxc://server/id)")
        url = (
            f"{self._client.homeserver}/_matrix/client/v1/media/download/"
            f"{quote(parts.netloc, safe='')}/{quote(media_id, safe='')}"
        )
        headers = {"Authorization": f"Bearer {self._client.access_token}"}
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=_DOWNLOAD)
        try:
            async with self._session.get(url, headers=headers, allow_redirects=False) as response:
                if response.status != 200:
                    raise AttachmentUnavailable(f"the homeserver answered HTTP {response.status}")
                return await read_limited(response, limit)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise AttachmentUnavailable(
                f"the file could not be fetched ({type(exc).__name__})"
            ) from None
