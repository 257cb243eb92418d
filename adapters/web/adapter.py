"""The web chat as a platform: messages kept in the store and pushed to the browser live.

A person's chat is `web:<user>`; each of their conversations is a thread of it and its own
session (`web:<user>:t<conversation>`). What the gateway sends lands in the conversation's
message log and goes out as a live event; edits (approval outcomes, streamed replies) update
the stored message and go out the same way, so any replica can send to any browser.
"""

from __future__ import annotations

from typing import Any

from adapters.web.conversations import Conversations
from adapters.web.render import to_html
from gateway.sdk import (
    Button,
    Capabilities,
    ChatKind,
    ChatRef,
    DeliveryError,
    MessageGone,
    Outbound,
    SentRef,
    Store,
    StreamSupport,
    UserRef,
    keys,
)
from gateway.sdk.media import WEB_IMAGES
from gateway.sdk.webkit import (
    ChatMessage,
    LiveHub,
    MessageLog,
    Streams,
    WebFiles,
    deleted,
    edited,
    sent,
)

PLATFORM = "web"
MAX_LEN = 100_000  # no platform limit: one message per reply
# Messages to the chat itself rather than a conversation (reports to an admin, relayed
# approvals) go to this conversation of the user.
NOTICES = "notices"
STREAM_INTERVAL = 0.25  # seconds between two states of a streamed reply


def chat_of(user: str, conversation: str) -> ChatRef:
    return ChatRef(platform=PLATFORM, chat_id=user, thread_id=conversation, kind=ChatKind.DIRECT)


def person(user: str) -> UserRef:
    return UserRef(platform=PLATFORM, user_id=user, display_name=user)


def live_key(user: str) -> str:
    return f"user:{user}"


class WebAdapter:
    platform = PLATFORM

    def __init__(self, store: Store, *, max_upload_bytes: int) -> None:
        self.capabilities = Capabilities(
            max_len=MAX_LEN,
            can_edit=True,
            buttons=True,
            threads=False,
            typing=True,
            max_upload_bytes=max_upload_bytes,
            # Streamed replies: the core posts the first words and edits the message; each
            # state reaches the browser as a live event, so updates can come often.
            streaming=StreamSupport(interval=STREAM_INTERVAL),
        )
        self.messages = MessageLog(store)
        self.hub = LiveHub(store, keys.WEB_CHANNEL)
        self.files = WebFiles(store)
        self.conversations = Conversations(store)
        self.watching = 0  # browsers connected to this process now
        self.streams = Streams()  # their event streams, ended when the gateway stops

    async def start(self) -> None:
        await self.hub.start()

    async def stop(self) -> None:
        await self.streams.close()
        await self.hub.stop()

    async def state(self) -> str:
        return f"running, {self.watching} browser(s) connected here"

    # -- the Adapter protocol -------------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        user, conversation = _where(out.chat)
        files = [await self.files.put(user, f.name, f.mime_type, f.data) for f in out.attachments]
        message = sent(out, files)
        await self.record(user, conversation, message)
        return SentRef(chat=out.chat, message_id=message.id)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        user, conversation = _where(ref.chat)
        await self.record(user, conversation, edited(await self._kept(ref), out))

    async def delete(self, ref: SentRef) -> None:
        user, conversation = _where(ref.chat)
        await self.record(user, conversation, deleted(await self._kept(ref)))

    async def _kept(self, ref: SentRef) -> ChatMessage:
        user, conversation = _where(ref.chat)
        message = await self.messages.get(chat_of(user, conversation).address, ref.message_id)
        if message is None:
            raise MessageGone(f"message {ref.message_id} is gone", permanent=True)
        return message

    async def typing(self, chat: ChatRef) -> None:
        user, conversation = _where(chat)
        await self.hub.publish(live_key(user), {"type": "typing", "conversation": conversation})

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        return await self.files.download(file_id, max_bytes)

    # -- shared with the chat's pages -------------------------------------------------------------

    async def record(self, user: str, conversation: str, message: ChatMessage) -> None:
        """Store a message (new or changed) and tell the user's browsers."""
        await self.messages.put(chat_of(user, conversation).address, message)
        # New messages move the conversation up the list; edits (a streamed reply) need not.
        if message.edited is None and not await self.conversations.touch(user, conversation):
            # The notices, or a conversation someone else started (a scheduled prompt's).
            title = "Notices" if conversation == NOTICES else f"Conversation {conversation}"
            await self.conversations.ensure(user, conversation, title)
        event = {"type": "message", "conversation": conversation, "message": view(message)}
        await self.hub.publish(live_key(user), event)


def view(message: ChatMessage) -> dict[str, Any]:
    """A message as the browser's script draws it (text already safe HTML)."""
    return {
        "id": message.id,
        "role": message.role,
        "html": "" if message.deleted else to_html(message.text, markdown=message.markdown),
        "buttons": [[_button(b) for b in row] for row in message.buttons],
        "files": [
            {
                "name": f.name,
                "size": f.size,
                "url": f"/chat/files/{f.id}",
                "image": f.mime_type in WEB_IMAGES,
            }
            for f in message.files
        ],
        "ts": message.ts,
        "edited": message.edited,
        "deleted": message.deleted,
    }


def _button(button: Button) -> dict[str, str]:
    return {"label": button.label, "data": button.data, "style": button.style}


def _where(chat: ChatRef) -> tuple[str, str]:
    if chat.platform != PLATFORM:
        raise DeliveryError(f"{chat.address} is not a web chat", permanent=True)
    return chat.chat_id, chat.thread_id or NOTICES
