"""Messages, edits, reactions, typing and receipts through matrix-nio, errors mapped.

Text goes as `m.text` with the Markdown as `body` and its HTML as `formatted_body`; an
edit is an `m.replace` event with the new text in `m.new_content`. In an encrypted room
nio encrypts for every device of the members (unverified ones included: the bot trusts on
first use, as most clients do). A replica that does not sync has no room state and no
Megolm sessions of its own, so it sends only to rooms without encryption.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from markdown_it import MarkdownIt
from nio import (
    AsyncClient,
    ErrorResponse,
    LocalProtocolError,
    MatrixRoom,
    RoomGetStateEventError,
    RoomSendResponse,
    SendRetryError,
)

from gateway.sdk import ChatKind, ChatRef, DeliveryError, MessageGone, Outbound, SentRef, split_text

log = logging.getLogger(__name__)

# Events are at most 65,536 bytes of JSON; the Markdown goes twice (body and its HTML).
MATRIX_LIMIT = 8000
_PERMANENT = ("M_FORBIDDEN", "M_NOT_FOUND", "M_UNKNOWN_TOKEN", "M_TOO_LARGE", "M_BAD_JSON")
_HTML = "org.matrix.custom.html"
_markdown = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def html_of(text: str) -> str:
    return str(_markdown.render(text)).strip()


def text_content(text: str, *, markdown: bool = True, msgtype: str = "m.text") -> dict[str, Any]:
    content: dict[str, Any] = {"msgtype": msgtype, "body": text, "m.mentions": {}}
    if markdown:
        content["format"] = _HTML
        content["formatted_body"] = html_of(text)
    return content


def relates_to(chat: ChatRef, reply_to: str | None) -> dict[str, Any] | None:
    """The relation of a new message: in its thread, and (in rooms) as a reply."""
    if chat.thread_id:
        relation: dict[str, Any] = {
            "rel_type": "m.thread",
            "event_id": chat.thread_id,
            "is_falling_back": reply_to is None,
            "m.in_reply_to": {"event_id": reply_to or chat.thread_id},
        }
        return relation
    # In a DM a quote of the question is noise; in a room it shows whom the bot answers.
    if reply_to and chat.kind is not ChatKind.DIRECT:
        return {"m.in_reply_to": {"event_id": reply_to}}
    return None


class MatrixSender:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client
        self._plain_rooms: set[str] = set()  # rooms a standby replica found unencrypted

    async def send(self, out: Outbound, *, extra: str = "") -> SentRef:
        """Every part of `out.text` (plus `extra`, plain, on the last), the first as the reply."""
        text = out.text
        parts = split_text(text, MATRIX_LIMIT) if text.strip() else [text]
        event_id = ""
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            content = text_content(part + (extra if last else ""), markdown=out.markdown)
            relation = relates_to(out.chat, out.reply_to if index == 0 else None)
            if relation:
                content["m.relates_to"] = relation
            event_id = await self.send_event(out.chat, "m.room.message", content)
        return SentRef(chat=out.chat, message_id=event_id)

    async def edit(self, ref: SentRef, out: Outbound, *, extra: str = "") -> None:
        # An edit is one event: the first part, if the new text is long.
        text = split_text(out.text, MATRIX_LIMIT)[0] + extra
        new = text_content(text, markdown=out.markdown)
        del new["m.mentions"]  # the edit notifies nobody
        content = {
            **text_content(f"* {text}", markdown=out.markdown),
            "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": ref.message_id},
        }
        try:
            await self.send_event(ref.chat, "m.room.message", content)
        except DeliveryError as exc:
            if "M_NOT_FOUND" in str(exc):
                raise MessageGone(str(exc)) from None
            raise

    async def redact(self, ref: SentRef) -> None:
        response = await self._client.room_redact(ref.chat.chat_id, ref.message_id)
        if isinstance(response, ErrorResponse) and response.status_code != "M_NOT_FOUND":
            raise _delivery_error("redact", response)

    async def react(self, chat: ChatRef, event_id: str, key: str) -> None:
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        await self.send_event(chat, "m.reaction", content)

    async def typing(self, chat: ChatRef) -> None:
        # Cosmetic and renewed every few seconds by the core: one try.
        response = await self._client.room_typing(chat.chat_id, True, timeout=10_000)
        if isinstance(response, ErrorResponse):
            raise _delivery_error("typing", response)

    async def receipt(self, room_id: str, event_id: str, thread_root: str | None) -> None:
        try:
            response = await self._client.update_receipt_marker(
                room_id, event_id, thread_id=thread_root or "main"
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("matrix receipt not sent room=%s error=%s", room_id, type(exc).__name__)
            return
        if isinstance(response, ErrorResponse):
            log.info("matrix receipt not sent room=%s error=%s", room_id, response.status_code)

    async def send_event(self, chat: ChatRef, event_type: str, content: dict[str, Any]) -> str:
        room_id = chat.chat_id
        if room_id not in self._client.rooms:
            await self._know_unencrypted(room_id)
        try:
            response = await self._client.room_send(
                room_id, event_type, content, ignore_unverified_devices=True
            )
        except (SendRetryError, LocalProtocolError) as exc:
            raise DeliveryError(f"Matrix could not encrypt for the room: {exc}") from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise DeliveryError(f"Matrix homeserver unreachable ({type(exc).__name__})") from None
        if not isinstance(response, RoomSendResponse):
            raise _delivery_error("send", response)
        return str(response.event_id)

    async def _know_unencrypted(self, room_id: str) -> None:
        """A room this process has not synced: send only if it has no encryption (a standby
        replica, or a room the bot has not seen yet)."""
        if room_id not in self._plain_rooms:
            response = await self._client.room_get_state_event(room_id, "m.room.encryption")
            if not isinstance(response, RoomGetStateEventError):
                raise DeliveryError(
                    "the room is encrypted and this replica does not sync Matrix: only the "
                    "replica holding the sync lease can encrypt"
                )
            if response.status_code != "M_NOT_FOUND":
                raise _delivery_error("room lookup", response)
            self._plain_rooms.add(room_id)
        user_id = self._client.user_id
        self._client.rooms.setdefault(room_id, MatrixRoom(room_id, user_id, encrypted=False))


def _delivery_error(what: str, response: ErrorResponse) -> DeliveryError:
    code = response.status_code or "unknown"
    permanent = code in _PERMANENT
    return DeliveryError(
        f"Matrix refused the {what}: {code} {response.message}", permanent=permanent
    )
