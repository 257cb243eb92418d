"""Messages of the web chat and the API, kept in the store and pushed live to whoever waits.

A chat's messages live in one store hash (message id -> JSON), so any replica can show a
conversation, edit a message another replica sent, or read a turn's final answer. Every
change is also published on a channel as a hint; `LiveHub` (one subscription per process)
hands it to the browsers and API requests waiting here. Hints can be lost (a Redis
subscription takes a moment, an outage drops them), so readers take the truth from the
store when they (re)connect and when a turn ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from gateway.runtime.tasks import stop_task
from gateway.sdk.messages import Button, Outbound
from gateway.store import keys
from gateway.store.base import Store

log = logging.getLogger(__name__)

KEEP_DAYS = 90.0  # a conversation nobody touches for this long is dropped
_QUEUE = 256  # events buffered per waiting browser or request; the oldest go first


class FileRef(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    mime_type: str
    size: int


class ChatMessage(BaseModel):
    """One message as shown: the bot's (sent, then maybe edited) or the person's own."""

    id: str
    role: Literal["bot", "user"]
    text: str = ""
    markdown: bool = True  # text is the agent's Markdown (else plain text)
    buttons: list[list[Button]] = []
    files: list[FileRef] = []
    reply_to: str | None = None
    ts: float
    edited: float | None = None
    deleted: bool = False


def new_id() -> str:
    """Sortable by time across replicas (nanoseconds, then random bits)."""
    return f"{time.time_ns():016x}{secrets.token_hex(3)}"


def sent(out: Outbound, files: Sequence[FileRef] = ()) -> ChatMessage:
    """A message the gateway sends, as kept."""
    return ChatMessage(
        id=new_id(),
        role="bot",
        text=out.text,
        markdown=out.markdown,
        buttons=[list(row) for row in out.buttons],
        files=list(files),
        reply_to=out.reply_to,
        ts=time.time(),
    )


def edited(message: ChatMessage, out: Outbound) -> ChatMessage:
    """The message after the gateway edits it (text and buttons replaced; files stay)."""
    return message.model_copy(
        update={
            "text": out.text,
            "markdown": out.markdown,
            "buttons": [list(row) for row in out.buttons],
            "edited": time.time(),
        }
    )


def deleted(message: ChatMessage) -> ChatMessage:
    return message.model_copy(update={"deleted": True, "text": "", "buttons": []})


class MessageLog:
    def __init__(self, store: Store, *, keep: int = 500) -> None:
        self._store = store
        self._keep = keep

    async def put(self, chat: str, message: ChatMessage) -> None:
        key = keys.web_messages(chat)
        await self._store.hset(key, message.id, message.model_dump_json())
        await self._store.expire(key, KEEP_DAYS * 86400)

    async def get(self, chat: str, message_id: str) -> ChatMessage | None:
        raw = await self._store.hget(keys.web_messages(chat), message_id)
        return None if raw is None else ChatMessage.model_validate_json(raw)

    async def all(self, chat: str) -> list[ChatMessage]:
        """The chat's messages, oldest first (the oldest beyond `keep` are dropped here)."""
        key = keys.web_messages(chat)
        found = []
        for message_id, raw in sorted((await self._store.hgetall(key)).items()):
            try:
                found.append(ChatMessage.model_validate_json(raw))
            except ValidationError:
                log.warning("unreadable chat message dropped chat=%s id=%s", chat, message_id)
        if len(found) > self._keep:
            old, found = found[: -self._keep], found[-self._keep :]
            await self._store.hdel(key, *(m.id for m in old))
        return found

    async def drop(self, chat: str) -> None:
        await self._store.delete(keys.web_messages(chat))


class LiveHub:
    """Events for browsers and API requests waiting in this process, from any replica."""

    def __init__(self, store: Store, channel: str) -> None:
        self._store = store
        self._channel = channel
        self._subscribers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen(), name=f"live {self._channel}")

    async def stop(self) -> None:
        await stop_task(self._task)

    @contextlib.contextmanager
    def subscribe(self, key: str) -> Iterator[asyncio.Queue[dict[str, Any]]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=_QUEUE)
        self._subscribers.setdefault(key, set()).add(queue)
        try:
            yield queue
        finally:
            listeners = self._subscribers.get(key)
            if listeners is not None:
                listeners.discard(queue)
                if not listeners:
                    del self._subscribers[key]

    async def publish(self, key: str, event: dict[str, Any]) -> None:
        """Tell every replica; a failure is logged (the store still holds the truth)."""
        try:
            await self._store.publish(self._channel, json.dumps({"to": key, "event": event}))
        except Exception as exc:
            log.warning("live event not published channel=%s error=%s", self._channel, exc)

    async def _listen(self) -> None:
        while True:
            try:
                async for raw in self._store.listen(self._channel):
                    self._deliver(raw)
                return  # the store was closed
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("live events listener failed; listening again")
                await asyncio.sleep(1.0)

    def _deliver(self, raw: str) -> None:
        try:
            message = json.loads(raw)
            key, event = str(message["to"]), dict(message["event"])
        except (ValueError, KeyError, TypeError):
            log.warning("bad live event ignored channel=%s", self._channel)
            return
        for queue in self._subscribers.get(key, ()):
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(event)
