"""The API as a platform: what a turn sends is kept in the store for the HTTP request waiting
for it, on whichever replica that request is.

Each request is a chat of its own (`api:<user>/<conversation>~<request id>`), so everything a
turn sends (the answer, its streamed states, an approval prompt, a question) belongs to
exactly one request; the conversation is one session (`api:<user>:t<conversation>`), so the
history, memory and tools carry over between requests. A message sent when no request waits
for it (a reply after a "pending approval" answer, a reminder) is kept in the conversation's
unread list and comes with the next reply there.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.sdk import (
    Capabilities,
    ChatKind,
    ChatRef,
    DeliveryError,
    MessageGone,
    Outbound,
    SentRef,
    SessionKey,
    Store,
    StreamSupport,
    UserRef,
    keys,
)
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

PLATFORM = "api"
SEPARATOR = "~"
NOTICES = "notices"  # the request id of messages to the user's chat itself (reports)
DEFAULT_CONVERSATION = "default"
OPEN_DAYS = 7.0  # unread replies are kept this long
STREAM_INTERVAL = 0.2  # seconds between two states of a streamed reply


@dataclass(frozen=True)
class RequestChat:
    """Where one API request's messages go."""

    user: str
    conversation: str
    request_id: str

    @property
    def chat(self) -> ChatRef:
        thread = f"{self.conversation}{SEPARATOR}{self.request_id}"
        return ChatRef(platform=PLATFORM, chat_id=self.user, thread_id=thread, kind=ChatKind.DIRECT)

    @property
    def session(self) -> SessionKey:
        return SessionKey(PLATFORM, self.user, self.conversation)

    @property
    def person(self) -> UserRef:
        return UserRef(platform=PLATFORM, user_id=self.user, display_name=self.user)

    @classmethod
    def of(cls, chat: ChatRef) -> RequestChat:
        if chat.platform != PLATFORM:
            raise DeliveryError(f"{chat.address} is not an API chat", permanent=True)
        conversation, _, request_id = (chat.thread_id or "").partition(SEPARATOR)
        return cls(chat.chat_id, conversation or DEFAULT_CONVERSATION, request_id or NOTICES)


class ApiAdapter:
    platform = PLATFORM
    # Buttons are kept with the message: the API shows approvals and questions as text. A
    # streamed reply (the core posts, then edits) becomes `chat.completion.chunk` deltas.
    capabilities = Capabilities(
        max_len=1_000_000,
        can_edit=True,
        buttons=True,
        threads=False,
        typing=False,
        streaming=StreamSupport(interval=STREAM_INTERVAL),
    )

    def __init__(self, store: Store) -> None:
        self._store = store
        self.messages = MessageLog(store, keep=200)
        self.files = WebFiles(store)  # images the requests carried, for their turns
        self.hub = LiveHub(store, keys.API_CHANNEL)
        self.waiting = 0  # requests waiting in this process now
        self.streams = Streams()  # their handlers, ended when the gateway stops

    async def start(self) -> None:
        await self.hub.start()

    async def stop(self) -> None:
        await self.streams.close()
        await self.hub.stop()

    async def state(self) -> str:
        return f"running, {self.waiting} request(s) waiting here"

    async def send(self, out: Outbound) -> SentRef:
        message = sent(out)
        await self.record(RequestChat.of(out.chat), message)
        return SentRef(chat=out.chat, message_id=message.id)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        where = RequestChat.of(ref.chat)
        await self.record(where, edited(await self._kept(where, ref), out))

    async def delete(self, ref: SentRef) -> None:
        where = RequestChat.of(ref.chat)
        await self.record(where, deleted(await self._kept(where, ref)))

    async def _kept(self, where: RequestChat, ref: SentRef) -> ChatMessage:
        message = await self.messages.get(where.chat.address, ref.message_id)
        if message is None:
            raise MessageGone(f"message {ref.message_id} is gone", permanent=True)
        return message

    async def typing(self, chat: ChatRef) -> None:
        return None

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        return await self.files.download(file_id, max_bytes)

    async def record(self, where: RequestChat, message: ChatMessage) -> None:
        """Store the message; tell the waiting request, or keep it unread for the next one."""
        await self.messages.put(where.chat.address, message)
        if await self._store.get(keys.api_live(where.request_id)) is None:
            unread = keys.api_open(where.session)
            await self._store.hset(unread, message.id, where.request_id)
            await self._store.expire(unread, OPEN_DAYS * 86400)
        await self.hub.publish(where.chat.address, {"message": message.model_dump(mode="json")})
