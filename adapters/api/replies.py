"""Following one API request's turn: its messages as the client reads them, text deltas for a
streamed response, and when the response may end (the turn is done, a person must answer,
or the wait is too long)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from adapters.api.adapter import ApiAdapter, RequestChat
from gateway.sdk import ApprovalChoice, Store, TurnOutcome, keys, prefix_of
from gateway.sdk.webkit import ChatMessage

POLL = 0.5  # seconds between looks at the store while a turn runs
LIVE_TTL = 30.0  # the "a client waits" mark lapses this long after its request stopped waiting

Ended = Literal["done", "approval", "question", "timeout", "gone"]


def is_approval(message: ChatMessage) -> bool:
    return any(prefix_of(b.data) == ApprovalChoice.prefix for row in message.buttons for b in row)


def client_text(message: ChatMessage) -> str:
    """What an API client sees of a message: its text, and the choices of a question."""
    if message.deleted:
        return ""
    if not message.buttons or is_approval(message):
        return message.text
    choices = [b.label for row in message.buttons for b in row]
    listed = "\n".join(f"{i}. {label}" for i, label in enumerate(choices, 1))
    return f"{message.text}\n\n{listed}\n\nReply with your answer (or the number of a choice)."


def joined(messages: list[ChatMessage]) -> str:
    return "\n\n".join(text for text in map(client_text, messages) if text)


class StreamText:
    """Successive states of a turn's messages -> what to append to a streamed answer.

    A growing last message (a streamed reply) is sent as its new characters; a new message
    starts a new paragraph; a message whose earlier text changed (an approval prompt edited to
    its outcome) is sent again, whole, in a new paragraph, since a stream cannot take back."""

    def __init__(self) -> None:
        self._shown: dict[str, str] = {}
        self._last = ""
        self.text = ""  # everything sent so far

    def showed(self, message: ChatMessage) -> bool:
        """Whether the client has this message as it is now (or it has nothing to show)."""
        return self._shown.get(message.id, "") == client_text(message)

    def feed(self, message: ChatMessage) -> str:
        new = client_text(message)
        old = self._shown.get(message.id)
        if old == new or (old is None and not new):
            return ""
        self._shown[message.id] = new
        if old is not None and self._last == message.id and new.startswith(old):
            delta = new[len(old) :]
        else:
            delta = ("\n\n" if self.text else "") + new
        self._last = message.id
        self.text += delta
        return delta


@dataclass
class TurnWatch:
    """Waits for one request's turn, feeding each message state to `seen` as it comes."""

    adapter: ApiAdapter
    store: Store
    where: RequestChat
    event_id: str
    done: asyncio.Future[TurnOutcome]
    seen: Callable[[ChatMessage], Awaitable[None]]
    approval_wait: Literal["wait", "pending"]
    timeout: float
    client_gone: Callable[[], bool] = lambda: False
    _states: dict[str, ChatMessage] = field(default_factory=dict)

    async def wait(self) -> Ended:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        checked = renewed = 0.0
        with self.adapter.hub.subscribe(self.where.chat.address) as events:
            getting: asyncio.Future[dict[str, Any]] = asyncio.ensure_future(events.get())
            try:
                while True:
                    # Wake for a message, for the end of a turn run here, or to look again.
                    wake: set[asyncio.Future[Any]] = {getting, self.done}
                    await asyncio.wait(wake, timeout=POLL, return_when="FIRST_COMPLETED")
                    if getting.done():
                        await self._take(ChatMessage.model_validate(getting.result()["message"]))
                        getting = asyncio.ensure_future(events.get())
                    now = loop.time()
                    if now - renewed >= LIVE_TTL / 3:
                        renewed = now
                        live = keys.api_live(self.where.request_id)
                        await self.store.set(live, "1", ttl=LIVE_TTL)
                    stop = self._needs_person()
                    if stop is not None:
                        return stop
                    if self.client_gone():
                        return "gone"
                    if self.done.done():
                        break
                    if now - checked >= POLL:
                        checked = now
                        if not await self._stored():
                            break
                    if now >= deadline:
                        return "timeout"
            finally:
                getting.cancel()
        # The store is the truth: a hint may have been lost or come late.
        for message in await self.adapter.messages.all(self.where.chat.address):
            await self._take(message)
        return "done"

    async def _take(self, message: ChatMessage) -> None:
        known = self._states.get(message.id)
        if known is not None and (known.edited or 0) > (message.edited or 0):
            return  # a late hint of an older state
        if known != message:
            self._states[message.id] = message
            await self.seen(message)

    def _needs_person(self) -> Ended | None:
        for message in self._states.values():
            if not message.buttons or message.deleted:
                continue
            if not is_approval(message):
                return "question"
            if self.approval_wait == "pending":
                return "approval"
        return None

    async def _stored(self) -> bool:
        """Whether the request's message still waits or runs (it leaves the inbox at the end
        of its turn, on whichever replica ran it)."""
        for entry in await self.store.pending(str(self.where.session)):
            if json.loads(entry.payload).get("event_id") == self.event_id:
                return True
        return False

    def messages(self) -> list[ChatMessage]:
        return [self._states[k] for k in sorted(self._states)]


async def wait_until_idle(store: Store, where: RequestChat, within: float) -> bool:
    """For an answer to a question: wait until the conversation's running turn has ended
    (polling the store: the turn may run on another replica)."""
    try:
        async with asyncio.timeout(within):
            while True:
                if not await store.pending(str(where.session)):
                    return True
                await asyncio.sleep(POLL)
    except TimeoutError:
        return False


async def take_unread(adapter: ApiAdapter, store: Store, where: RequestChat) -> list[ChatMessage]:
    """Replies of this conversation no client has read (after a "pending" answer, reminders),
    oldest first; they count as read from now on."""
    unread = keys.api_open(where.session)
    found: list[ChatMessage] = []
    taken: list[str] = []
    for message_id, request_id in (await store.hgetall(unread)).items():
        if request_id == where.request_id:
            continue
        other = RequestChat(where.user, where.conversation, request_id)
        message = await adapter.messages.get(other.chat.address, message_id)
        taken.append(message_id)
        if message is not None:
            found.append(message)
    if taken:
        await store.hdel(unread, *taken)
    return sorted(found, key=lambda m: m.id)
