"""What the core needs from a platform: the Adapter protocol and the outbox that routes to it.

Adapters implement `Adapter`; the core only ever talks to them through
`Outbox`, so it never imports an adapter module.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from gateway.sdk.messages import (
    ButtonPress,
    ChatKind,
    ChatRef,
    Inbound,
    Outbound,
    PressReply,
    SentRef,
)

if TYPE_CHECKING:
    from gateway.approvals.seals import EntrySigner
    from gateway.intake.admission import Submission
    from gateway.runtime.http import HttpServer
    from gateway.runtime.metrics import Metrics
    from gateway.sdk.extensions import Extensions
    from gateway.store.base import Store


@dataclass(frozen=True)
class StreamSupport:
    """How a platform shows a reply while it is written (gateway/streaming/ drives it)."""

    interval: float  # default seconds between two updates of one message (rate limits)
    # The core's generic way, where the adapter has no `open_stream` of its own (or it
    # declines): post the first words, then edit that message.
    edits: bool = True
    # Size of a Markdown text as the platform counts it against `max_len` (after rendering).
    measure: Callable[[str], int] = field(default=len)


@dataclass(frozen=True)
class Capabilities:
    """What a platform can do; the core adapts its behaviour (buttons, edits) to it."""

    max_len: int
    can_edit: bool = True
    buttons: bool = True
    threads: bool = False
    typing: bool = True
    # Largest file `send` uploads (Outbound.attachments); 0: the platform takes no files.
    max_upload_bytes: int = 0
    streaming: StreamSupport | None = None  # None: replies arrive whole


class DeliveryError(Exception):
    """A platform refused or failed to deliver a message after retries."""

    def __init__(self, message: str, *, permanent: bool = False) -> None:
        super().__init__(message)
        # Permanent: blocked, kicked, chat gone. Retrying will not help.
        self.permanent = permanent


class MessageGone(DeliveryError):
    """The message to edit no longer exists (someone deleted it)."""


@runtime_checkable
class MessageDeleter(Protocol):
    """An adapter that can delete a message it sent (a streamed message taken back)."""

    async def delete(self, ref: SentRef) -> None: ...


@runtime_checkable
class Adapter(Protocol):
    platform: str
    capabilities: Capabilities

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, out: Outbound) -> SentRef:
        """Send a message; long text is split by the adapter. Returns the last part's receipt."""
        ...

    async def edit(self, ref: SentRef, out: Outbound) -> None: ...

    async def typing(self, chat: ChatRef) -> None:
        """Show a 'typing…' indicator once; the core renews it while a turn runs."""
        ...


@runtime_checkable
class ReportsState(Protocol):
    """An adapter that can say how it is doing, for the console's overview."""

    async def state(self) -> str:
        """One line: connected, standby, retrying (and why)."""
        ...


@runtime_checkable
class DirectChats(Protocol):
    """An adapter whose direct chat with a person has an id of its own (Discord opens a DM
    channel); elsewhere the person's user id is the direct chat's id."""

    async def direct_chat(self, user_id: str) -> ChatRef:
        """The direct chat with `user_id`; raises DeliveryError when it cannot be opened."""
        ...


@runtime_checkable
class Acknowledges(Protocol):
    """An adapter that can mark a person's message as seen without a message of its own (a
    reaction), for a message taken into the turn already running."""

    async def acknowledge(self, chat: ChatRef, message_id: str) -> None:
        """Mark the message; raises DeliveryError when the platform refuses."""
        ...


@runtime_checkable
class ReadsHistory(Protocol):
    """An adapter that can read a conversation's earlier messages with the bot's own
    permissions there (Slack's conversations.* history, Discord's channel history)."""

    async def read_history(
        self, chat: ChatRef, *, max_messages: int, max_chars: int
    ) -> tuple[str, ...]:
        """The chat's (or its thread's) newest messages as "Name: text" lines, oldest first;
        raises DeliveryError when the platform refuses."""
        ...


class AttachmentError(Exception):
    """An attachment could not be fetched; the message says why (too large, expired, ...)."""


class AttachmentTooLarge(AttachmentError):
    """The file is bigger than the caller allowed (checked before and while downloading)."""


class AttachmentUnavailable(AttachmentError):
    """The platform would not give the file (expired or unknown handle, network failure)."""


@runtime_checkable
class FileSource(Protocol):
    """An adapter that can fetch the bytes of an attachment its users sent."""

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """The bytes of `Attachment.file_id`, from the platform's own file API only; raises
        AttachmentTooLarge past `max_bytes` and AttachmentUnavailable otherwise."""
        ...


# Callbacks the core hands to adapters. `submit` answers with what became of the message
# (started, queued, refused, not stored...) as soon as it is stored or refused.
SubmitInbound = Callable[[Inbound], Awaitable["Submission"]]
HandlePress = Callable[[ButtonPress], Awaitable[PressReply]]


class Outbox:
    """Routes outgoing messages to the adapter of the target chat's platform."""

    def __init__(self) -> None:
        self._adapters: dict[str, Adapter] = {}

    def register(self, adapter: Adapter) -> None:
        self._adapters[adapter.platform] = adapter

    def adapter(self, platform: str) -> Adapter:
        try:
            return self._adapters[platform]
        except KeyError:
            raise DeliveryError(f"no adapter for platform {platform!r} is running") from None

    def has(self, platform: str) -> bool:
        return platform in self._adapters

    @property
    def adapters(self) -> list[Adapter]:
        return list(self._adapters.values())

    def capabilities(self, platform: str) -> Capabilities:
        return self.adapter(platform).capabilities

    async def send(self, out: Outbound) -> SentRef:
        return await self.adapter(out.chat.platform).send(out)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        await self.adapter(ref.chat.platform).edit(ref, out)

    async def typing(self, chat: ChatRef) -> None:
        await self.adapter(chat.platform).typing(chat)

    async def acknowledge(self, chat: ChatRef, message_id: str) -> None:
        """Mark a message as taken in, where the platform has a way (nothing elsewhere)."""
        adapter = self.adapter(chat.platform)
        if isinstance(adapter, Acknowledges):
            await adapter.acknowledge(chat, message_id)

    def reads_history(self, platform: str) -> bool:
        """Whether the platform's adapter runs here and can read earlier messages."""
        return isinstance(self._adapters.get(platform), ReadsHistory)

    async def read_history(
        self, chat: ChatRef, *, max_messages: int, max_chars: int
    ) -> tuple[str, ...] | None:
        """A chat's earlier messages (ReadsHistory); None where the platform offers no way."""
        adapter = self.adapter(chat.platform)
        if not isinstance(adapter, ReadsHistory):
            return None
        return await adapter.read_history(chat, max_messages=max_messages, max_chars=max_chars)

    async def direct_chat(self, platform: str, user_id: str) -> ChatRef:
        """Where a direct message to this person goes (an admin told of a failed job)."""
        adapter = self.adapter(platform)
        if isinstance(adapter, DirectChats):
            return await adapter.direct_chat(user_id)
        return ChatRef(platform=platform, chat_id=user_id, kind=ChatKind.DIRECT)


@dataclass(frozen=True)
class AdapterContext:
    """What an adapter gets from the gateway: where to hand messages and presses, and services."""

    submit: SubmitInbound
    press: HandlePress
    store: Store
    # Where a platform registers its access rules and admission middlewares.
    extensions: Extensions
    metrics: Metrics
    http: HttpServer | None
    # (name, description) of the chat commands, for platforms that register them.
    commands: Callable[[], list[tuple[str, str]]]
    instance_id: str
    # Seals what decides in the store (gateway/approvals/seals.py): the web chat's sign-ins.
    signer: EntrySigner
    # Why this sender may not use the bot here (None: they may), by the static access rules:
    # an adapter that takes files itself (the web chat) asks before storing any.
    refusal: Callable[[Inbound], str | None] = lambda _inbound: None
    # How much of a conversation an adapter reads into a turn (`context.*`).
    context_messages: int = 20
    context_chars: int = 4000
