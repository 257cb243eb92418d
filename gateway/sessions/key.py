"""Session identity: which messages share one conversation history and one turn queue."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gateway.sdk.messages import ChatRef, Inbound


class Isolation(StrEnum):
    """How messages are grouped into sessions.

    AUTO uses the thread where the message has one, else the chat.
    """

    AUTO = "auto"
    CHAT = "chat"  # the whole chat shares one session, threads included
    THREAD = "thread"  # each thread is its own session; the chat's main line is one too
    USER_IN_CHAT = "user"  # each person has their own session in a chat (and thread)


@dataclass(frozen=True, slots=True)
class SessionKey:
    platform: str
    chat_id: str
    thread_id: str | None = None
    user_id: str | None = None

    def __str__(self) -> str:
        parts = [self.platform, self.chat_id]
        if self.thread_id:
            parts.append(f"t{self.thread_id}")
        if self.user_id:
            parts.append(f"u{self.user_id}")
        return ":".join(parts)

    @property
    def chat_scope(self) -> str:
        """The chat this session belongs to, without thread or user: `platform:chat_id`."""
        return f"{self.platform}:{self.chat_id}"

    @classmethod
    def parse(cls, text: str) -> SessionKey:
        platform, chat_id, *rest = text.split(":")
        thread_id = user_id = None
        for part in rest:
            if part.startswith("t"):
                thread_id = part[1:]
            elif part.startswith("u"):
                user_id = part[1:]
        return cls(platform, chat_id, thread_id, user_id)


def session_key(
    chat: ChatRef, user_id: str | None, isolation: Isolation = Isolation.AUTO
) -> SessionKey:
    if isolation is Isolation.CHAT:
        return SessionKey(chat.platform, chat.chat_id)
    thread = chat.thread_id
    if isolation is Isolation.USER_IN_CHAT:
        return SessionKey(chat.platform, chat.chat_id, thread, user_id)
    return SessionKey(chat.platform, chat.chat_id, thread)


def key_for(inbound: Inbound, isolation: Isolation = Isolation.AUTO) -> SessionKey:
    return session_key(inbound.chat, inbound.sender.user_id, isolation)
