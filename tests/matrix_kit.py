"""A person on the test Synapse, driven with matrix-nio (the library the bot uses): rooms,
messages, reactions, files, and what they see of the bot's messages, decrypted and with
edits applied."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nio import (
    AsyncClient,
    AsyncClientConfig,
    Event,
    MegolmEvent,
    ReceiptEvent,
    RoomCreateResponse,
    RoomSendResponse,
    TypingNoticeEvent,
    UploadResponse,
)
from nio.crypto.attachments import decrypt_attachment, encrypt_attachment

from tests.fixtures_synapse import Account

MEGOLM = {"algorithm": "m.megolm.v1.aes-sha2"}


@dataclass
class Seen:
    """One message of someone else as this person sees it now."""

    event_id: str
    sender: str
    room_id: str
    content: dict[str, Any]
    encrypted: bool
    edits: int = 0
    text: str = ""

    @property
    def relation(self) -> dict[str, Any]:
        found = self.content.get("m.relates_to")
        return found if isinstance(found, dict) else {}


@dataclass
class Person:
    account: Account
    client: AsyncClient
    seen: list[Seen] = field(default_factory=list)
    undecrypted: list[str] = field(default_factory=list)
    receipts: list[tuple[str, str]] = field(default_factory=list)  # (user, event id)
    typing: set[str] = field(default_factory=set)  # everyone seen typing
    _task: asyncio.Task[None] | None = None

    @property
    def user_id(self) -> str:
        return self.account.user_id

    @classmethod
    async def start(cls, homeserver: str, account: Account, store: Path) -> Person:
        await asyncio.to_thread(store.mkdir, parents=True, exist_ok=True)
        config = AsyncClientConfig(encryption_enabled=True, store_sync_tokens=True)
        client = AsyncClient(homeserver, account.user_id, store_path=str(store), config=config)
        client.restore_login(account.user_id, account.device_id, account.access_token)
        person = cls(account, client)
        client.add_event_callback(person._on_event, Event)
        client.add_event_callback(person._on_megolm, MegolmEvent)
        client.add_ephemeral_callback(person._on_receipt, ReceiptEvent)
        client.add_ephemeral_callback(person._on_typing, TypingNoticeEvent)
        await client.keys_upload()
        person._task = asyncio.create_task(client.sync_forever(timeout=300, full_state=True))
        await asyncio.wait_for(client.synced.wait(), 30)
        return person

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.client.close()

    # -- rooms -------------------------------------------------------------------------------

    async def create_room(
        self, invite: list[str], *, encrypted: bool = False, direct: bool = False
    ) -> str:
        state = [{"type": "m.room.encryption", "state_key": "", "content": MEGOLM}]
        response = await self.client.room_create(
            invite=invite, is_direct=direct, initial_state=state if encrypted else ()
        )
        assert isinstance(response, RoomCreateResponse), response
        return str(response.room_id)

    async def wait_joined(self, room_id: str, user_id: str, within: float = 30) -> None:
        async def joined() -> bool:
            members = await self.client.joined_members(room_id)
            return user_id in {m.user_id for m in getattr(members, "members", [])}

        await _until(joined, within, f"{user_id} joins {room_id}")
        # This person's client must know the new member before encrypting to it.
        await self._synced_again()

    async def wait_gone(self, room_id: str, user_id: str, within: float = 30) -> None:
        async def left() -> bool:
            state = await self.client.room_get_state_event(room_id, "m.room.member", user_id)
            membership = getattr(state, "content", {}).get("membership")
            return membership in ("leave", "ban")

        await _until(left, within, f"{user_id} declines {room_id}")

    async def join(self, room_id: str) -> None:
        await self.client.join(room_id)
        await self._synced_again()

    # -- saying ------------------------------------------------------------------------------

    async def say(self, room_id: str, text: str, **content: Any) -> str:
        return await self.send(room_id, {"msgtype": "m.text", "body": text, **content})

    async def send(
        self, room_id: str, content: dict[str, Any], kind: str = "m.room.message"
    ) -> str:
        response = await self.client.room_send(
            room_id, kind, content, ignore_unverified_devices=True
        )
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    async def react(self, room_id: str, event_id: str, key: str) -> str:
        relates = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
        return await self.send(room_id, {"m.relates_to": relates}, "m.reaction")

    async def upload(self, data: bytes, mime: str, name: str, *, encrypt: bool) -> dict[str, Any]:
        """The `url` (or encrypted `file`) part of a file message's content."""
        body, keys = encrypt_attachment(data) if encrypt else (data, None)
        response, _ = await self.client.upload(
            lambda *_: body, content_type=mime, filename=name, filesize=len(body)
        )
        assert isinstance(response, UploadResponse), response
        if keys is None:
            return {"url": response.content_uri}
        return {"file": {**keys, "url": response.content_uri}}

    async def download(self, content: dict[str, Any]) -> bytes:
        file = content.get("file")
        mxc = file["url"] if file else content["url"]
        response = await self.client.download(mxc)
        body = bytes(response.body)
        if not file:
            return body
        return bytes(
            decrypt_attachment(body, file["key"]["k"], file["hashes"]["sha256"], file["iv"])
        )

    # -- seeing ------------------------------------------------------------------------------

    def messages(self, sender: str, room_id: str | None = None) -> list[Seen]:
        return [m for m in self.seen if m.sender == sender and room_id in (None, m.room_id)]

    async def wait_message(
        self, sender: str, room_id: str, text: str = "", *, count: int = 1, within: float = 30
    ) -> list[Seen]:
        """The first `count` messages of `sender` in the room once one of them holds `text`."""

        async def arrived() -> bool:
            found = self.messages(sender, room_id)
            return len(found) >= count and any(text in m.text for m in found)

        await _until(arrived, within, f"{count} message(s) with {text!r} from {sender}")
        return self.messages(sender, room_id)

    async def _synced_again(self) -> None:
        self.client.synced.clear()
        await asyncio.wait_for(self.client.synced.wait(), 30)

    async def _on_event(self, room: Any, event: Event) -> None:
        source = event.source
        if source.get("type") != "m.room.message" or event.sender == self.user_id:
            return
        content = source.get("content", {})
        relates = content.get("m.relates_to") or {}
        if relates.get("rel_type") == "m.replace":
            for message in self.seen:
                if message.event_id == relates.get("event_id"):
                    message.text = content.get("m.new_content", {}).get("body", "")
                    message.edits += 1
            return
        self.seen.append(
            Seen(
                event_id=event.event_id,
                sender=event.sender,
                room_id=room.room_id,
                content=content,
                encrypted=bool(getattr(event, "decrypted", False)),
                text=str(content.get("body", "")),
            )
        )

    async def _on_megolm(self, room: Any, event: MegolmEvent) -> None:
        self.undecrypted.append(event.event_id)

    async def _on_typing(self, room: Any, event: TypingNoticeEvent) -> None:
        self.typing.update(event.users)

    async def _on_receipt(self, room: Any, event: ReceiptEvent) -> None:
        for receipt in event.receipts:
            self.receipts.append((receipt.user_id, receipt.event_id))


async def _until(check: Any, within: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        if await check():
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.1)
