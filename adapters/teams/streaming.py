"""Streamed replies in personal chats with Teams' own streaming: typing activities that carry a
`streaminfo` entity (informative lines while tools run, then the answer so far), ended by the
message with `streamType: final`. The SDK's StreamingResponse does the same, but it belongs to
the TurnContext of the request being answered; chatgate's turns run after the 200 (on any
replica), so this handle speaks the wire protocol through the ConnectorClient itself.

Teams refuses streaming where it does not offer it (group chats, channels, some clients)
with 403 or a BadArgument; the core then posts and updates instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from microsoft_agents.activity import Activity, StreamInfo

from adapters.teams.connector import ConnectorRefused
from adapters.teams.sending import MAX_TEXT, TeamsSender
from gateway.sdk import (
    ChatRef,
    DeliveryError,
    Outbound,
    SentRef,
    StreamFrame,
    StreamRefused,
)

log = logging.getLogger(__name__)


class TeamsStream:
    """One message of a reply, streamed into a personal chat."""

    limit = MAX_TEXT
    refresh: float | None = None

    def __init__(self, sender: TeamsSender, chat: ChatRef, refused: Callable[[str], None]) -> None:
        self._sender = sender
        self._chat = chat
        self._refused = refused  # told why, when Teams will not stream here
        self._stream_id: str | None = None
        self._sequence = 0
        self._shown = ""

    async def update(self, frame: StreamFrame) -> None:
        if frame.answer:
            kind, text = "streaming", frame.answer
        elif frame.progress:
            kind, text = "informative", frame.progress[-1].text
        else:
            return
        if text == self._shown:
            return
        self._sequence += 1
        info = StreamInfo(stream_type=kind, stream_sequence=self._sequence)
        if self._stream_id is not None:
            info.stream_id = self._stream_id
        activity = Activity(type="typing", text=text, entities=[info])
        try:
            ref = await self._sender.send_activity(self._chat, activity)
        except ConnectorRefused as exc:
            if exc.status in (400, 403) and self._stream_id is None:
                self._refused(exc.detail)
                raise StreamRefused(f"Teams refused streaming (HTTP {exc.status})") from None
            raise
        if self._stream_id is None:
            self._stream_id = ref.message_id
        self._shown = text

    async def finish(self, text: str) -> SentRef:
        if self._stream_id is None:
            return await self._sender.post(Outbound(chat=self._chat, text=text))
        activity = Activity(
            type="message",
            text=text,
            text_format="markdown",
            entities=[StreamInfo(stream_type="final", stream_id=self._stream_id)],
        )
        activity.id = self._stream_id
        await self._sender.send_activity(self._chat, activity)
        return SentRef(chat=self._chat, message_id=self._stream_id)

    async def abort(self) -> None:
        if self._stream_id is None:
            return
        ref = SentRef(chat=self._chat, message_id=self._stream_id)
        try:
            await self.finish(self._shown or "…")
            await self._sender.delete(ref)
        except DeliveryError as exc:
            log.info("streamed teams message not taken back error=%s", exc)
        self._stream_id = None
