"""One turn for one session: load history, run the agent, deliver the reply, save history.

The router decides *when* a turn runs (one at a time per session); this module
decides *what* a turn does, and turns every failure into one clear line for the user.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from gateway.agent import Agent, TurnTimeout
from gateway.channels import DeliveryError, Outbox
from gateway.config import Settings
from gateway.history import LeaseHandle, SessionRecord, SessionStore, compact
from gateway.llm.errors import LLMError
from gateway.llm.types import Message
from gateway.memory import MemoryBook
from gateway.messages import ChatKind, Inbound, InboundKind, Outbound, SentRef
from gateway.metrics import Metrics
from gateway.prompt import PromptSection, build_system_prompt
from gateway.sessions import SessionKey
from gateway.store.base import StoreUnavailable
from gateway.tasks import stop_task
from gateway.tooling import ToolCatalog, ToolContext, ToolScope, ToolSpec

log = logging.getLogger(__name__)

INTERRUPTED_NOTE = "[This request was interrupted before an answer was given.]"
EMPTY_ANSWER = "I have no answer to that. Try asking in another way."


@dataclass
class TurnOutcome:
    reply: str | None = None
    error: str | None = None  # the line shown to the user when the turn failed
    sent: SentRef | None = None
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled


@dataclass
class TurnRequest:
    inbound: Inbound
    key: SessionKey
    context_lines: Sequence[str] = ()  # recent unaddressed group messages, oldest first
    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    answering: bool = False  # the reply is final and being delivered; the turn is ending
    # Set by the router when it held the store lease: the session's stored JSON (fetched
    # with the lease, saving a round trip) and the lease to release when saving.
    preloaded: tuple[str | None] | None = None
    lease: LeaseHandle | None = None


# Platforms show "typing…" for about five seconds per call.
TYPING_EVERY = 4.0


class TypingIndicator:
    """Keeps the platform's typing indicator alive while a turn runs; approvals pause it."""

    def __init__(self, outbox: Outbox, request: TurnRequest, delay: float) -> None:
        self._outbox = outbox
        self._chat = request.inbound.chat
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


# The running turn's typing indicator, so an approval prompt can pause it.
current_typing: ContextVar[TypingIndicator | None] = ContextVar("current_typing", default=None)


@contextlib.asynccontextmanager
async def typing_paused() -> AsyncIterator[None]:
    indicator = current_typing.get()
    if indicator is None:
        yield
        return
    async with indicator.paused():
        yield


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
        self._sections = list(prompt_sections)

    def add_prompt_section(self, section: PromptSection) -> None:
        self._sections.append(section)

    async def run(self, request: TurnRequest) -> TurnOutcome:
        inbound, key = request.inbound, request.key
        started = time.monotonic()
        if request.preloaded is not None:
            record = self._sessions.parse(request.preloaded[0])
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
        user_message: Message = {"role": "user", "content": user_content(request)}
        history = compact(
            [*record.messages, user_message], self._settings.agent.history_token_budget
        )
        typing = TypingIndicator(self._outbox, request, self._settings.router.typing_delay)
        token = current_typing.set(typing)
        typing.start()
        outcome = TurnOutcome()
        try:
            result = await self._agent.run(
                record.system,
                history,
                self._tools(inbound),
                self._context(request),
                catalog=self._catalog,
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
            history.append({"role": "assistant", "content": INTERRUPTED_NOTE})
            await asyncio.shield(self._save(key, record, history, request.lease))
            raise
        finally:
            current_typing.reset(token)
            await typing.stop()
        if outcome.error is not None:
            # Keep the user's message so the next turn still has it in context.
            history.append({"role": "assistant", "content": f"[Not answered: {outcome.error}]"})
        request.answering = True
        outcome.sent = await self._deliver(request, outcome.reply or outcome.error or "")
        await self._save(key, record, history, request.lease)
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

    def _context(self, request: TurnRequest) -> ToolContext:
        inbound = request.inbound
        return ToolContext(
            session=request.key,
            chat=inbound.chat,
            user=inbound.sender,
            turn_id=request.turn_id,
            message_id=inbound.message_id,
            attachments=inbound.attachments,
            # A scheduled prompt was written by the model, not by a person this turn.
            user_text=inbound.text if inbound.kind is InboundKind.USER else "",
        )

    async def _deliver(self, request: TurnRequest, text: str) -> SentRef | None:
        inbound = request.inbound
        out = Outbound(chat=inbound.chat, text=text, reply_to=inbound.message_id)
        try:
            return await self._outbox.send(out)
        except DeliveryError as exc:
            log.warning("reply not delivered session=%s error=%s", request.key, exc)
            self._metrics.inc("deliveries_failed_total")
            return None

    async def _save(
        self,
        key: SessionKey,
        record: SessionRecord,
        history: list[Message],
        lease: LeaseHandle | None,
    ) -> None:
        record.messages = history
        record.turns += 1
        try:
            await self._sessions.save(key, record, lease=lease)
        except StoreUnavailable as exc:
            log.error("history not saved session=%s error=%s", key, exc)


def user_content(request: TurnRequest) -> str:
    """The user's message as the model sees it: text, attachments, recent group context."""
    inbound = request.inbound
    parts: list[str] = []
    if request.context_lines:
        parts.append(
            "[Recent messages in this chat, for context]\n" + "\n".join(request.context_lines)
        )
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
