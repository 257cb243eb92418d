"""Outgoing posts over REST: splitting, threads, buttons, edits, uploads, DMs and errors.

Any process can send (REST needs no WebSocket). Mattermost renders Markdown itself, so the
agent's text goes as written. What still fails after the API client's retries becomes a
`DeliveryError`, permanent when Mattermost refused for good (no permission, no channel).
"""

from __future__ import annotations

import logging
from typing import Any

from adapters.mattermost.api import MattermostAPI, MattermostError
from adapters.mattermost.buttons import ActionSigner, button_props
from adapters.mattermost.normalize import PLATFORM
from gateway.sdk import (
    ChatKind,
    ChatRef,
    DeliveryError,
    MessageGone,
    Outbound,
    OutboundFile,
    SentRef,
    split_text,
)

log = logging.getLogger(__name__)

MAX_LEN = 16383  # Mattermost's post limit, in characters
FILES_PER_POST = 10


class MattermostSender:
    def __init__(
        self, api: MattermostAPI, bot_id: str, signer: ActionSigner, public_url: str
    ) -> None:
        self._api = api
        self._bot_id = bot_id
        self._signer = signer
        self._public_url = public_url
        self._direct: dict[str, ChatRef] = {}  # user id -> the DM channel with them

    async def send(self, out: Outbound) -> SentRef:
        parts = split_text(out.text.strip() or "…", MAX_LEN)
        post_id = ""
        for number, part in enumerate(parts):
            post = self._post(out.chat, part)
            if number == len(parts) - 1 and out.buttons:
                post["props"] = self._props(out)
            post_id = await self._create(out, post)
        return SentRef(chat=out.chat, message_id=post_id)

    async def send_files(self, out: Outbound) -> SentRef:
        """Upload the files, then post them (ten to a post) with the text as the caption."""
        post_id = ""
        files = list(out.attachments)
        for start in range(0, len(files), FILES_PER_POST):
            group = files[start : start + FILES_PER_POST]
            infos = await self._upload(out.chat, group)
            post = self._post(out.chat, out.text.strip() if start == 0 else "")
            post["file_ids"] = [str(info["id"]) for info in infos]
            post_id = await self._create(out, post)
        return SentRef(chat=out.chat, message_id=post_id)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        text = out.text.strip() or "…"
        if len(text) > MAX_LEN:  # edits cannot split: keep the beginning
            text = text[: MAX_LEN - 1] + "…"
        patch: dict[str, Any] = {"message": text}
        # A patch without props keeps the old ones: clear the buttons unless new ones came.
        # Props given replace them all, so the bot's own mark goes along.
        props = self._props(out) if out.buttons else {"attachments": []}
        patch["props"] = {**props, "from_bot": "true"}
        try:
            await self._api.patch_post(ref.message_id, patch)
        except MattermostError as exc:
            if exc.status == 404:
                raise MessageGone(f"Mattermost edit failed: {exc}") from exc
            raise delivery_error(exc, ref.chat, "edit") from exc

    async def delete(self, ref: SentRef) -> None:
        try:
            await self._api.delete_post(ref.message_id)
        except MattermostError as exc:
            if exc.status != 404:
                raise delivery_error(exc, ref.chat, "delete") from exc

    async def typing(self, chat: ChatRef) -> None:
        try:
            await self._api.typing(self._bot_id, chat.chat_id, chat.thread_id or "")
        except MattermostError as exc:
            raise delivery_error(exc, chat, "typing") from exc

    async def direct_chat(self, user_id: str) -> ChatRef:
        """The DM channel with a person (a user id is not a channel id on Mattermost)."""
        found = self._direct.get(user_id)
        if found is not None:
            return found
        person = ChatRef(platform=PLATFORM, chat_id=user_id, kind=ChatKind.DIRECT)
        try:
            channel = await self._api.direct_channel(self._bot_id, user_id)
        except MattermostError as exc:
            raise delivery_error(exc, person, "DM open") from exc
        chat = ChatRef(platform=PLATFORM, chat_id=str(channel["id"]), kind=ChatKind.DIRECT)
        self._direct[user_id] = chat
        return chat

    # -- helpers ---------------------------------------------------------------------------

    def _post(self, chat: ChatRef, message: str) -> dict[str, Any]:
        post: dict[str, Any] = {"channel_id": chat.chat_id, "message": message}
        if chat.thread_id:
            post["root_id"] = chat.thread_id
        return post

    def _props(self, out: Outbound) -> dict[str, Any]:
        if not self._public_url:
            log.warning(
                "mattermost buttons need mattermost.public_url; sent without buttons chat=%s",
                out.chat.address,
            )
            return {}
        return button_props(out.buttons, out.chat, self._signer, self._public_url)

    async def _create(self, out: Outbound, post: dict[str, Any]) -> str:
        try:
            if out.ephemeral_to:
                body = {"user_id": out.ephemeral_to, "post": post}
                created = await self._api.object("POST", "/posts/ephemeral", json=body)
            else:
                created = await self._api.create_post(post)
        except MattermostError as exc:
            raise delivery_error(exc, out.chat, "send") from exc
        return str(created.get("id", ""))

    async def _upload(self, chat: ChatRef, files: list[OutboundFile]) -> list[dict[str, Any]]:
        try:
            return await self._api.upload(
                chat.chat_id, [(item.name, item.mime_type, item.data) for item in files]
            )
        except MattermostError as exc:
            raise delivery_error(exc, chat, "upload") from exc


def delivery_error(exc: MattermostError, chat: ChatRef, action: str) -> DeliveryError:
    """Log a failed call in one line and classify it; the token is never in `exc`."""
    if exc.status in (400, 403, 404, 413):
        log.error(
            "mattermost refused %s channel=%s status=%s id=%s error=%s",
            action,
            chat.address,
            exc.status,
            exc.error_id,
            exc,
        )
        refused = f"Mattermost refused to {action} in {chat.address}: {exc}"
        return DeliveryError(refused, permanent=True)
    log.warning("mattermost %s failed channel=%s error=%s", action, chat.address, exc)
    return DeliveryError(f"Mattermost {action} failed: {exc}")
