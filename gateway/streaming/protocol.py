"""What a streamed reply needs from a platform: the frames it shows and the handle that shows them.

The core (gateway/streaming/reply.py) decides what to show and when; a platform with a
native way to stream (Telegram drafts, Slack's stream methods) implements
`StreamingAdapter`, any other that can edit gets the core's post-then-edit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from gateway.sdk.channels import DeliveryError
from gateway.sdk.messages import ChatRef, SentRef, UserRef

ProgressState = Literal["running", "done", "failed"]


@dataclass(frozen=True)
class ProgressLine:
    """One tool call as a streamed reply shows it while it runs."""

    id: str  # the tool call's id
    text: str  # e.g. "Running shell: `ls -la`"
    state: ProgressState = "running"


@dataclass(frozen=True)
class StreamFrame:
    """What one message of a reply being written shows now.

    `display` is the Markdown to show (the answer so far with open code fences closed, or
    the progress lines before the answer starts); `answer` is the answer text itself as
    written, for platforms that append instead of replacing; `progress` lists the turn's
    tool calls, for platforms that show them natively.
    """

    display: str
    answer: str = ""
    progress: tuple[ProgressLine, ...] = ()


class StreamThrottled(DeliveryError):
    """The platform asked to slow down; the next update may go out after `retry_after` s."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class StreamRefused(DeliveryError):
    """The platform's native streaming is not available here; post-then-edit is used instead."""


class StreamHandle(Protocol):
    """One message of a reply, shown while the model writes it.

    `update` shows a frame (StreamThrottled: slow down; StreamRefused: use edits instead;
    DeliveryError: this frame was not shown). `finish` makes `text` the message's final
    content, even when nothing was shown yet, and returns its receipt. `abort` takes back
    what was shown where the platform allows it, and never raises.
    """

    # Most Markdown characters one message holds (measured as StreamSupport.measure does).
    limit: int
    # Seconds after which an unchanged frame must be shown again (drafts expire); None: never.
    refresh: float | None

    async def update(self, frame: StreamFrame) -> None: ...

    async def finish(self, text: str) -> SentRef: ...

    async def abort(self) -> None: ...


@runtime_checkable
class StreamingAdapter(Protocol):
    """An adapter with a native way to stream (Telegram drafts, Slack's stream methods)."""

    def open_stream(
        self, chat: ChatRef, *, reply_to: str | None, recipient: UserRef | None
    ) -> StreamHandle | None:
        """A handle for the next message of a reply; None: use the generic post-then-edit."""
        ...
