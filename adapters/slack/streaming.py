"""Streamed replies in Slack threads through the chat streaming methods.

`chat.startStream` opens the message in the thread being answered, `chat.appendStream`
adds what the model wrote since (Markdown, which Slack renders itself) and tool calls as
task cards, and `chat.stopStream` ends it. Those methods only append, so when the text
already shown stops being the start of the answer (the model wrote something, then
called a tool instead), the message is stopped and goes on with `chat.update`. Where the
workspace or the app cannot use them, the core posts and edits instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from adapters.slack.sending import MAX_TEXT, Chunk, SlackCallFailed, SlackSender
from gateway.sdk import (
    ChatRef,
    DeliveryError,
    Outbound,
    ProgressLine,
    SentRef,
    StreamFrame,
    StreamRefused,
    UserRef,
)

log = logging.getLogger(__name__)

_STATUS = {"running": "in_progress", "done": "complete", "failed": "error"}


class SlackStream:
    """One message of a reply, streamed into the thread it answers."""

    limit = MAX_TEXT
    refresh: float | None = None

    def __init__(
        self,
        sender: SlackSender,
        chat: ChatRef,
        recipient: UserRef | None,
        *,
        started: Callable[[SentRef], Awaitable[None]],
        refused: Callable[[str], None],
    ) -> None:
        self._sender = sender
        self._chat = chat
        self._recipient = recipient
        self._started = started  # the adapter's bookkeeping for a reply that went out
        self._refused = refused  # told Slack's error code when the methods are refused
        self._ref: SentRef | None = None
        self._appended = ""  # the answer text the message shows
        self._tasks: dict[str, str] = {}  # task id -> status the message shows
        self._streaming = False  # started and not stopped
        self._editing = False  # went on with chat.update

    async def update(self, frame: StreamFrame) -> None:
        if self._editing:
            await self._sender.update(
                self._need_ref(), Outbound(chat=self._chat, text=frame.display)
            )
            return
        if not frame.answer.startswith(self._appended):
            await self._to_edits(frame.display)
            return
        text = frame.answer[len(self._appended) :]
        chunks = self._task_chunks(frame.progress)
        if text:
            chunks.append({"type": "markdown_text", "text": text})
        if not chunks:
            return
        if self._ref is None:
            await self._start(chunks)
        else:
            try:
                await self._sender.append_stream(self._ref, chunks)
            except SlackCallFailed as exc:
                # The stream ended on Slack's side (it times out): go on by editing.
                log.info("slack stream append failed; editing instead error=%s", exc.code)
                self._streaming = False
                await self._to_edits(frame.display)
                return
        self._appended += text
        self._tasks.update({c["id"]: c["status"] for c in chunks if c["type"] == "task_update"})

    async def finish(self, text: str) -> SentRef:
        if self._ref is None:
            ref = await self._sender.post(Outbound(chat=self._chat, text=text))
            await self._started(ref)
            return ref
        ref = self._ref
        if self._streaming and not self._editing and text.startswith(self._appended):
            rest = text[len(self._appended) :]
            chunks = [{"type": "markdown_text", "text": rest}] if rest else []
            try:
                await self._sender.stop_stream(ref, chunks)
                self._streaming = False
                return ref
            except SlackCallFailed as exc:
                log.info("slack stream stop failed; editing instead error=%s", exc.code)
                self._streaming = False
        await self._stop_quietly()
        await self._sender.update(ref, Outbound(chat=self._chat, text=text))
        return ref

    async def abort(self) -> None:
        if self._ref is None:
            return
        await self._stop_quietly()
        try:
            await self._sender.delete(self._ref)
        except DeliveryError as exc:
            log.info("streamed slack message not deleted error=%s", exc)
        self._ref = None

    async def _start(self, chunks: list[Chunk]) -> None:
        try:
            ts = await self._sender.start_stream(self._chat, self._recipient, chunks)
        except SlackCallFailed as exc:
            if exc.code.startswith("http_5"):
                raise  # Slack is having trouble, not refusing: try again with the next frame
            self._refused(exc.code)
            raise StreamRefused(f"chat.startStream refused: {exc.code}") from None
        self._ref = SentRef(chat=self._chat, message_id=ts)
        self._streaming = True
        await self._started(self._ref)

    async def _to_edits(self, display: str) -> None:
        """The shown text is no longer the answer's start: replace it from now on."""
        self._editing = True
        if self._ref is None:
            self._ref = await self._sender.post(Outbound(chat=self._chat, text=display))
            await self._started(self._ref)
            return
        await self._stop_quietly()
        await self._sender.update(self._ref, Outbound(chat=self._chat, text=display))

    async def _stop_quietly(self) -> None:
        if self._streaming and self._ref is not None:
            self._streaming = False
            try:
                await self._sender.stop_stream(self._ref, [])
            except DeliveryError as exc:
                log.info("slack stream not stopped error=%s", exc)

    def _task_chunks(self, progress: tuple[ProgressLine, ...]) -> list[Chunk]:
        chunks: list[Chunk] = []
        for line in progress:
            status = _STATUS[line.state]
            if self._tasks.get(line.id) != status:
                chunks.append(
                    {"type": "task_update", "id": line.id, "title": line.text, "status": status}
                )
        return chunks

    def _need_ref(self) -> SentRef:
        if self._ref is None:
            raise DeliveryError("the streamed Slack message is not there yet")
        return self._ref
