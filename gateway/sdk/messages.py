"""Normalized message types shared by every platform adapter and the core.

Adapters translate SDK events into these and back; nothing above the adapters
ever sees a python-telegram-bot, discord.py or slack-bolt object.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gateway.runtime.unicode import valid_unicode


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Every message crossing the core is built from these types, so this is the one place
    # where text from a platform (or a model) is made encodable, whichever adapter sent it.
    @field_validator("*", mode="after")
    @classmethod
    def _valid_unicode(cls, value: object) -> object:
        if isinstance(value, str):
            return valid_unicode(value)
        if isinstance(value, tuple) and any(isinstance(v, str) for v in value):
            return tuple(valid_unicode(v) if isinstance(v, str) else v for v in value)
        return value


class ChatKind(StrEnum):
    DIRECT = "direct"
    GROUP = "group"
    CHANNEL = "channel"


class ChatRef(_Frozen):
    """Where a message lives: a chat on one platform, optionally a thread in it."""

    platform: str
    chat_id: str
    thread_id: str | None = None
    kind: ChatKind = ChatKind.DIRECT
    # Guild (Discord) or workspace (Slack) the chat belongs to, for access rules.
    space_id: str | None = None

    def without_thread(self) -> ChatRef:
        return self.model_copy(update={"thread_id": None})

    @property
    def address(self) -> str:
        """Stable text form, e.g. `telegram:-100123/7`; used in logs and job targets."""
        base = f"{self.platform}:{self.chat_id}"
        return f"{base}/{self.thread_id}" if self.thread_id else base


class UserRef(_Frozen):
    platform: str
    user_id: str
    display_name: str | None = None
    is_bot: bool = False
    # Platform roles (Discord) that access rules may refer to.
    roles: tuple[str, ...] = ()

    @property
    def address(self) -> str:
        """`platform:user_id`, the form used in `access.admins`."""
        return f"{self.platform}:{self.user_id}"

    @property
    def label(self) -> str:
        return self.display_name or self.user_id


class AttachmentKind(StrEnum):
    IMAGE = "image"
    DOCUMENT = "document"
    AUDIO = "audio"  # an audio file (music, a recording sent as a file)
    VOICE = "voice"  # a voice note recorded in the chat app
    VIDEO = "video"
    OTHER = "other"


class Attachment(_Frozen):
    """A file the user sent; the bytes stay on the platform until the turn or a tool asks.

    `file_id` is the owning adapter's handle (Telegram file id, Slack file id, Discord
    attachment URL); only that adapter's `FileSource.download` turns it into bytes. The
    MIME type is what the platform claimed: the bytes are sniffed before anything trusts it.
    """

    kind: AttachmentKind
    file_id: str
    name: str | None = None
    size: int | None = None
    mime_type: str | None = None


class OutboundFile(_Frozen):
    """A file for an adapter to upload natively (photo, voice note, audio, document).

    The core has read the bytes already (through the workspace API, or from a media
    service) and sniffed their type; adapters pick the platform's upload from `kind`.
    """

    kind: AttachmentKind
    name: str
    mime_type: str
    data: bytes = Field(repr=False)

    @property
    def size(self) -> int:
        return len(self.data)


class InboundKind(StrEnum):
    USER = "user"  # a person wrote it
    AGENT = "agent"  # synthetic: a scheduled prompt run as a turn


class Inbound(_Frozen):
    """One message to the bot, normalized."""

    event_id: str  # platform event id; admission deduplicates on it
    chat: ChatRef
    sender: UserRef
    text: str
    message_id: str | None = None  # platform id of this message, for replying to it
    mentioned: bool = False  # the bot was addressed (mention, reply to it, command, DM)
    attachments: tuple[Attachment, ...] = ()
    kind: InboundKind = InboundKind.USER
    received_at: float = Field(default_factory=time.time)
    # Earlier messages of the conversation the adapter read for this turn (a Slack thread's
    # when the bot is first mentioned in it), oldest first, as "Name: text" lines.
    context: tuple[str, ...] = ()
    # The platform id of the person's message this one edits: it replaces that message while
    # no turn has used it, and follows as a message of its own after.
    edit_of: str | None = None
    # An explicit session (SessionKey text) instead of the isolation strategy's; scheduled
    # prompts use it to run in a fresh session of their chat.
    session: str | None = None
    job_id: str | None = None  # the scheduled job that sent it (kind agent), for its budget
    # A profile asked for by name (the API's model name); None: the bindings decide.
    profile: str | None = None

    @property
    def is_command(self) -> bool:
        return self.text.startswith("/")


ButtonStyle = Literal["primary", "danger", "secondary"]


class Button(_Frozen):
    """A button on an outgoing message; `data` comes back verbatim in a ButtonPress."""

    label: str
    data: str = Field(max_length=64)  # Telegram callback_data limit, the tightest one
    style: ButtonStyle = "secondary"


class Outbound(_Frozen):
    """A message for an adapter to render and send."""

    chat: ChatRef
    text: str
    buttons: tuple[tuple[Button, ...], ...] = ()  # rows of buttons
    reply_to: str | None = None  # platform message id to reply to
    markdown: bool = True  # text is the agent's Markdown; adapters convert it
    ephemeral_to: str | None = None  # user id: only they see it (where supported)
    # Files sent with the message; `text` is then their caption (it may be empty).
    attachments: tuple[OutboundFile, ...] = ()


class SentRef(_Frozen):
    """Receipt for a sent message: enough to edit it later from any process."""

    chat: ChatRef
    message_id: str


class ButtonPress(_Frozen):
    """A click on a button the bot sent."""

    event_id: str
    chat: ChatRef
    user: UserRef
    data: str
    message: SentRef | None = None


class PressReply(_Frozen):
    """What the adapter shows after a press: a toast to the presser, an edit of the message."""

    toast: str
    edit_text: str | None = None  # replace the message text (buttons removed)
    alert: bool = False  # shown as a refusal or warning rather than a confirmation
