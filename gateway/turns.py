"""One turn for one session: load history, run the agent, deliver the reply, save history.

The router decides *when* a turn runs (one at a time per session); this module
decides *what* a turn does, and turns every failure into one clear line for the user.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.agent import Agent, TurnTimeout
from gateway.channels import DeliveryError, Outbox
from gateway.config import Settings
from gateway.history import SessionRecord, SessionStore, compact
from gateway.llm.errors import LLMError
from gateway.llm.types import Message
from gateway.memory import MemoryBook
from gateway.messages import ChatKind, ChatRef, Inbound, Outbound, SentRef
from gateway.metrics import Metrics
from gateway.outcome import TurnOutcome
from gateway.prompt import PromptSection, build_system_prompt
from gateway.session_leases import LeaseHandle, TurnLease
from gateway.sessions import SessionKey
from gateway.store.base import StoreUnavailable
from gateway.streaming.reply import ReplyStream, ReplyStreams
from gateway.tasks import stop_task
from gateway.tooling import NO_STREAM, ToolCatalog, ToolContext, ToolScope, ToolSpec

log = logging.getLogger(__name__)

INTERRUPTED_NOTE = "[This request was interrupted before an answer was given.]"
EMPTY_ANSWER = "I have no answer to that. Try asking in another way."

__all__ = ["TurnJob", "TurnOutcome", "TurnRunner", "TypingIndicator"]


@dataclass(frozen=True)
class TurnJob:
    """One message that will run as a turn, as admission handed it to the session queue."""

    inbound: Inbound
    key: SessionKey
    turn_id: str
    # The session's lease and stored history, when intake took them in its round trip.
    lease: LeaseHandle | None = None
    record: str | None = None


# Platforms show "typing…" for about five seconds per call.
TYPING_EVERY = 4.0
# A stopped turn's streamed message gets this long to show "(stopped)".
STOP_SECONDS = 10.0


class TypingIndicator:
    """Keeps the platform's typing indicator alive while a turn runs; approvals pause it."""

    def __init__(self, outbox: Outbox, chat: ChatRef, delay: float) -> None:
        self._outbox = outbox
        self._chat = chat
        self._delay = delay
        self._paused = 0
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if (
            self._outbox.has(self._chat.platform)
            and self._outbox.capabilities(self._chat.platform).typing
        ):
            # A timer, not a task, until the delay passes: most fast turns never need one.
            self._timer = asyncio.get_running_loop().call_later(self._delay, self._begin)

    def _begin(self) -> None:
        self._timer = None
        self._task = asyncio.create_task(self._loop(), name=f"typing {self._chat.address}")

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        await stop_task(self._task)

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    async def _loop(self) -> None:
        while True:
            if not self._paused:
                try:
                    await self._outbox.typing(self._chat)
                except Exception as exc:  # typing is cosmetic; never fail a turn over it
                    log.debug("typing failed chat=%s error=%s", self._chat.address, exc)
            await asyncio.sleep(TYPING_EVERY)


class TurnRunner:
    def __init__(
        self,
        *,
        settings: Settings,
        agent: Agent,
        sessions: SessionStore,
        memory: MemoryBook,
        catalog: ToolCatalog,
        outbox: Outbox,
        metrics: Metrics,
        prompt_sections: Sequence[PromptSection] = (),
    ) -> None:
        self._settings = settings
        self._agent = agent
        self._sessions = sessions
        self._memory = memory
        self._catalog = catalog
        self._outbox = outbox
        self._metrics = metrics
        # Read at each new session, so a section registered after this runner was built counts.
        self._sections = prompt_sections
        self._streams = ReplyStreams(settings, outbox)

    async def run(
        self,
        job: TurnJob,
        lease: TurnLease,
        *,
        context_lines: Sequence[str] = (),
        on_answering: Callable[[], None] | None = None,
    ) -> TurnOutcome:
        """Run the turn and end it with one store round trip (history + lease release).

        `context_lines` are recent unaddressed group messages, oldest first;
        `on_answering` is called when the final reply is about to be delivered.
        """
        inbound, key = job.inbound, job.key
        started = time.monotonic()
        if lease.preloaded:
            record = self._sessions.parse(lease.record)
        else:
            record = await self._sessions.load(key)
        if record.is_new:
            notes = await self._memory.notes(inbound.chat, inbound.sender)
            record.system = build_system_prompt(
                inbound.chat,
                inbound.sender,
                notes=notes.render(),
                extra=self._settings.agent.system_prompt,
                sections=self._sections,
            )
        user_message: Message = {"role": "user", "content": user_content(inbound, context_lines)}
        history = compact(
            [*record.messages, user_message], self._settings.agent.history_token_budget
        )
        typing = TypingIndicator(self._outbox, inbound.chat, self._settings.router.typing_delay)
        tools = self._tools(inbound)
        stream = self._streams.open(inbound, tools, typing)
        typing.start()
        outcome = TurnOutcome()
        try:
            result = await self._agent.run(
                record.system,
                history,
                tools,
                self._context(job, typing, stream),
                catalog=self._catalog,
                events=stream,
            )
            history.extend(result.new_messages)
            record.prompt_tokens += result.usage.prompt_tokens
            record.completion_tokens += result.usage.completion_tokens
            outcome.reply = result.text.strip() or EMPTY_ANSWER
            self._metrics.inc("tool_calls_total", result.tool_calls)
        except LLMError as exc:
            log.warning("llm error session=%s error=%s", key, type(exc).__name__)
            outcome.error = exc.user_message
        except TurnTimeout:
            outcome.error = (
                f"I ran out of time on this request (limit "
                f"{self._settings.agent.max_turn_seconds:.0f} s). Try a smaller request."
            )
        except asyncio.CancelledError:
            outcome.cancelled = True
            written = stream.written if stream is not None else ""
            note = f"{written}\n\n{INTERRUPTED_NOTE}" if written else INTERRUPTED_NOTE
            history.append({"role": "assistant", "content": note})
            try:
                # History first: /stop waits for it, so a /new right after is not undone.
                await asyncio.shield(self._save(key, record, history, lease))
            finally:
                if stream is not None:
                    await asyncio.shield(self._stop_stream(stream))
            raise
        except BaseException:
            if stream is not None:
                await asyncio.shield(stream.aclose())  # no half answer stays on show
            raise
        finally:
            await typing.stop()
        if outcome.error is not None:
            # Keep the user's message so the next turn still has it in context.
            history.append({"role": "assistant", "content": f"[Not answered: {outcome.error}]"})
        if on_answering is not None:
            on_answering()
        # A failed turn's line replaces whatever part of an answer was streamed.
        outcome.sent = await self._deliver(job, outcome.reply or outcome.error or "", stream)
        if stream is not None and stream.updates:
            self._metrics.inc("stream_updates_total", stream.updates)
        await self._save(key, record, history, lease)
        self._metrics.observe("turn_seconds", time.monotonic() - started)
        self._metrics.inc("turns_total", status="ok" if outcome.ok else "error")
        return outcome

    def _tools(self, inbound: Inbound) -> Sequence[ToolSpec[Any]]:
        scope = ToolScope(
            platform=inbound.chat.platform,
            chat_id=inbound.chat.chat_id,
            provider=self._settings.llm.provider_name,
            model=self._settings.llm.model,
        )
        return self._catalog.for_scope(scope)

    def _context(
        self, job: TurnJob, typing: TypingIndicator, stream: ReplyStream | None
    ) -> ToolContext:
        inbound = job.inbound
        return ToolContext(
            session=job.key,
            chat=inbound.chat,
            user=inbound.sender,
            turn_id=job.turn_id,
            message_id=inbound.message_id,
            attachments=inbound.attachments,
            typing=typing,
            stream=stream or NO_STREAM,
        )

    async def _deliver(self, job: TurnJob, text: str, stream: ReplyStream | None) -> SentRef | None:
        """The one final message of the turn: the streamed message becomes it, or it is sent."""
        inbound = job.inbound
        out = Outbound(chat=inbound.chat, text=text, reply_to=inbound.message_id)
        try:
            if stream is not None:
                return await stream.finish(text)
            return await self._outbox.send(out)
        except DeliveryError as exc:
            log.warning("reply not delivered session=%s error=%s", job.key, exc)
            self._metrics.inc("deliveries_failed_total")
            return None

    async def _stop_stream(self, stream: ReplyStream) -> None:
        """End a stopped turn's streamed message with what was written and "(stopped)"."""
        try:
            async with asyncio.timeout(STOP_SECONDS):
                await stream.stop()
        except TimeoutError:
            log.warning("stopped reply not shown in time chat=%s", stream.chat.address)
            await stream.aclose()

    async def _save(
        self, key: SessionKey, record: SessionRecord, history: list[Message], lease: TurnLease
    ) -> None:
        record.messages = history
        record.turns += 1
        try:
            await lease.commit(self._sessions.save_ops(key, record))
        except StoreUnavailable as exc:
            log.error("history not saved session=%s error=%s", key, exc)


def user_content(inbound: Inbound, context_lines: Sequence[str] = ()) -> str:
    """The user's message as the model sees it: text, attachments, recent group context."""
    parts: list[str] = []
    if context_lines:
        parts.append("[Recent messages in this chat, for context]\n" + "\n".join(context_lines))
    text = inbound.text
    if inbound.chat.kind is not ChatKind.DIRECT:
        text = f"{inbound.sender.label}: {text}"
    parts.append(text)
    for att in inbound.attachments:
        size = f", {att.size} bytes" if att.size else ""
        parts.append(
            f"[attachment: {att.kind.value} {att.name or ''} ({att.mime_type or 'unknown type'}"
            f"{size}) file_id={att.file_id}]"
        )
    return "\n\n".join(parts)
