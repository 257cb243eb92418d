"""Files both ways. In: attachments fetched from SharePoint's pre-authenticated link, or from
the Bot Connector with the bot's token (only to a connector host). Out: in a personal chat a
file consent card, the bytes kept in the store until the person accepts and Teams hands over
an upload URL in their OneDrive; elsewhere images go inline and other files are refused with
a sentence (Teams gives bots no upload into group chats or channels without Microsoft Graph).
"""

from __future__ import annotations

import base64
import logging
import uuid
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from microsoft_agents.activity import Activity
from microsoft_agents.activity import Attachment as ActivityAttachment

from adapters.teams.conversations import Conversations, trusted_service_url
from adapters.teams.normalize import CONNECTOR_PREFIX, DOWNLOAD_PREFIX
from adapters.teams.sending import TeamsSender
from adapters.teams.token import BotToken
from gateway.sdk import (
    AttachmentUnavailable,
    ChatKind,
    ChatRef,
    DeliveryError,
    EntrySigner,
    Outbound,
    OutboundFile,
    SentRef,
    Store,
    StoreUnavailable,
    keys,
)
from gateway.sdk.media import read_limited

log = logging.getLogger(__name__)

CONSENT_CARD = "application/vnd.microsoft.teams.card.file.consent"
FILE_INFO_CARD = "application/vnd.microsoft.teams.card.file.info"
MAX_UPLOAD_BYTES = 10 * 1024 * 1024  # kept in the store until accepted
MAX_INLINE_IMAGE = 1024 * 1024  # an image sent inline as a data URL
# Hosts of the Bot Connector that serve attachments with the bot's token.
_CONNECTOR_HOSTS = ("smba.trafficmanager.net", ".botframework.com", ".teams.microsoft.com")
_KIND = "teams file offer"
NO_FILES_HERE = (
    "I can only send files in a personal chat with me here; open a chat with me and ask again."
)


class TeamsFiles:
    def __init__(
        self,
        session: aiohttp.ClientSession,
        token: BotToken,
        conversations: Conversations,
        sender: TeamsSender,
        store: Store,
        signer: EntrySigner,
        offer_ttl: float,
    ) -> None:
        self._session = session
        self._token = token
        self._conversations = conversations
        self._sender = sender
        self._store = store
        self._signer = signer
        self._offer_ttl = offer_ttl

    # -- in ------------------------------------------------------------------------------

    async def download(self, file_id: str, max_bytes: int) -> bytes:
        headers: dict[str, str] = {}
        if file_id.startswith(DOWNLOAD_PREFIX):
            url = file_id[len(DOWNLOAD_PREFIX) :]
        elif file_id.startswith(CONNECTOR_PREFIX):
            url = file_id[len(CONNECTOR_PREFIX) :]
            if self._connector_host(url):
                headers["Authorization"] = f"Bearer {await self._token.get()}"
        else:
            raise AttachmentUnavailable("not a Teams attachment")
        if not trusted_service_url(url, allow_local=self._conversations.allow_local):
            raise AttachmentUnavailable("the attachment's URL is not HTTPS")
        try:
            timeout = aiohttp.ClientTimeout(total=120)
            async with self._session.get(url, headers=headers, timeout=timeout) as response:
                if response.status != 200:
                    raise AttachmentUnavailable(f"Teams gave HTTP {response.status}")
                return await read_limited(response, max_bytes)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise AttachmentUnavailable(f"cannot fetch the file ({type(exc).__name__})") from None

    def _connector_host(self, url: str) -> bool:
        origin = _origin(url)
        if origin in {_origin(known) for known in self._conversations.service_urls()}:
            return True
        host = urlsplit(url).hostname or ""
        return urlsplit(url).scheme == "https" and any(
            host == suffix or (suffix.startswith(".") and host.endswith(suffix))
            for suffix in _CONNECTOR_HOSTS
        )

    # -- out -----------------------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        ref: SentRef | None = None
        if out.text:
            ref = await self._sender.post(out.model_copy(update={"attachments": ()}))
        for file in out.attachments:
            ref = await self._send_one(out.chat, file)
        assert ref is not None
        return ref

    async def _send_one(self, chat: ChatRef, file: OutboundFile) -> SentRef:
        if chat.kind is ChatKind.DIRECT and file.size <= MAX_UPLOAD_BYTES:
            return await self._offer(chat, file)
        if file.mime_type.startswith("image/") and file.size <= MAX_INLINE_IMAGE:
            data = base64.b64encode(file.data).decode()
            attachment = ActivityAttachment(
                content_type=file.mime_type,
                content_url=f"data:{file.mime_type};base64,{data}",
                name=file.name,
            )
            return await self._sender.send_activity(
                chat, Activity(type="message", attachments=[attachment])
            )
        raise DeliveryError(NO_FILES_HERE, permanent=True)

    async def _offer(self, chat: ChatRef, file: OutboundFile) -> SentRef:
        offer = uuid.uuid4().hex
        where = keys.platform_file_offer("teams", offer)
        value = {
            "name": file.name,
            "mime": file.mime_type,
            "data": base64.b64encode(file.data).decode(),
        }
        try:
            await self._store.set(
                where, self._signer.seal(_KIND, where, value), ttl=self._offer_ttl
            )
        except StoreUnavailable as exc:
            raise DeliveryError(f"the file could not be kept for upload ({exc})") from None
        card = ActivityAttachment(
            content_type=CONSENT_CARD,
            name=file.name,
            content={
                "description": file.name,
                "sizeInBytes": file.size,
                "acceptContext": {"offer": offer},
                "declineContext": {"offer": offer},
            },
        )
        return await self._sender.send_activity(chat, Activity(type="message", attachments=[card]))

    async def answer_consent(self, chat: ChatRef, card_id: str | None, value: Any) -> None:
        """The person accepted (upload the bytes, then show the file) or declined an offer."""
        if not isinstance(value, dict):
            return
        context = value.get("context")
        offer = context.get("offer") if isinstance(context, dict) else None
        if not isinstance(offer, str):
            return
        where = keys.platform_file_offer("teams", offer)
        kept = self._signer.open(_KIND, where, await self._store.get(where))
        if not isinstance(kept, dict):
            await self._replace_card(chat, card_id, "That file is no longer available.")
            return
        if value.get("action") != "accept":
            await self._store.delete(where)
            await self._replace_card(chat, card_id, f"Not sent: {kept['name']}")
            return
        info = value.get("uploadInfo")
        upload_url = info.get("uploadUrl") if isinstance(info, dict) else None
        allow_local = self._conversations.allow_local
        if not isinstance(upload_url, str) or not trusted_service_url(
            upload_url, allow_local=allow_local
        ):
            raise DeliveryError("Teams gave no usable upload URL")
        data = base64.b64decode(kept["data"])
        headers = {
            "Content-Length": str(len(data)),
            "Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}",
        }
        try:
            timeout = aiohttp.ClientTimeout(total=300)
            async with self._session.put(
                upload_url, data=data, headers=headers, timeout=timeout
            ) as response:
                if response.status not in (200, 201):
                    raise DeliveryError(f"OneDrive refused the upload (HTTP {response.status})")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"cannot upload the file ({type(exc).__name__})") from None
        await self._store.delete(where)
        assert isinstance(info, dict)
        shown = ActivityAttachment(
            content_type=FILE_INFO_CARD,
            name=str(info.get("name") or kept["name"]),
            content_url=str(info.get("contentUrl") or ""),
            content={"uniqueId": info.get("uniqueId"), "fileType": info.get("fileType")},
        )
        await self._sender.send_activity(chat, Activity(type="message", attachments=[shown]))
        await self._replace_card(chat, card_id, f"Sent: {kept['name']}")

    async def _replace_card(self, chat: ChatRef, card_id: str | None, text: str) -> None:
        if not card_id:
            return
        try:
            await self._sender.update(
                SentRef(chat=chat, message_id=card_id), Outbound(chat=chat, text=text)
            )
        except DeliveryError as exc:
            log.info("teams consent card not updated error=%s", exc)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()
