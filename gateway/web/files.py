"""Files of the web chat and the API, kept in the store so every replica can serve them and
hand them to a turn: what people upload (the adapters' `FileSource`) and what the agent sends
back."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import secrets
from dataclasses import dataclass

from gateway.sdk.channels import AttachmentTooLarge, AttachmentUnavailable
from gateway.store import keys
from gateway.store.base import Store
from gateway.web.transcript import KEEP_DAYS, FileRef

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredFile:
    ref: FileRef
    owner: str  # the web chat user who may fetch it
    data: bytes


class WebFiles:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def put(self, owner: str, name: str, mime_type: str, data: bytes) -> FileRef:
        ref = FileRef(id=secrets.token_urlsafe(16), name=name, mime_type=mime_type, size=len(data))
        record = {
            "owner": owner,
            "name": name,
            "mime_type": mime_type,
            "data": base64.b64encode(data).decode(),
        }
        await self._store.set(keys.web_file(ref.id), json.dumps(record), ttl=KEEP_DAYS * 86400)
        return ref

    async def get(self, file_id: str) -> StoredFile | None:
        if not file_id or len(file_id) > 64:
            return None
        raw = await self._store.get(keys.web_file(file_id))
        if raw is None:
            return None
        try:
            record = json.loads(raw)
            data = base64.b64decode(record["data"], validate=True)
            ref = FileRef(
                id=file_id, name=record["name"], mime_type=record["mime_type"], size=len(data)
            )
            owner = record["owner"]
        except (ValueError, TypeError, KeyError, binascii.Error):
            # Not a record this gateway wrote (damaged, or written by something else): as if
            # the file were gone, never an error page.
            log.warning("unreadable web file record ignored id=%s", file_id)
            return None
        if not isinstance(owner, str):
            return None
        return StoredFile(ref, owner, data)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """The bytes for a turn (the adapters' `FileSource.download`)."""
        stored = await self.get(file_id)
        if stored is None:
            raise AttachmentUnavailable("the file is no longer kept")
        if max_bytes is not None and stored.ref.size > max_bytes:
            raise AttachmentTooLarge(
                f"the file has {stored.ref.size:,} bytes; the limit is {max_bytes:,}"
            )
        return stored.data
