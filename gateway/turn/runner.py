"""One turn for one session: load history, run the agent, deliver the reply, save history.

The session queue decides *when* a turn runs (one at a time per session); this module
decides *what* a turn does, and turns every failure into one clear line for the user.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from gateway.config import Settings
from gateway.llm.errors import LLMError
from gateway.llm.types import Message
from gateway.media.content import user_content
from gateway.media.turn import PreparedInput, TurnMedia
from gateway.profiles.plan import TurnPlan, TurnPlanner, TurnRefused
from gateway.runtime.faults import crash_point
from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_task
from gateway.runtime.telemetry import SpanRecorder, Telemetry
from gateway.sdk.channels import DeliveryError, Outbox
from gateway.sdk.messages import ChatRef, Inbound, InboundKind, Outbound, SentRef
from gateway.sdk.outcome import TurnOutcome
from gateway.sdk.tooling import NO_STREAM, ShownImages, ToolCatalog, ToolContext
from gateway.sessions.compaction import Compactor, summary_block
from gateway.sessions.fencing import StaleTurn
from gateway.sessions.history import SessionRecord, SessionStore
from gateway.sessions.key import SessionKey
from gateway.sessions.turnlog import turn_text
from gateway.store.base import Batch, StoreUnavailable
from gateway.store.inbox import Claimed
from gateway.store.search import SearchDoc
from gateway.streaming.factory import ReplyStreams
from gateway.streaming.reply import ReplyStream
from gateway.turn.agent import Agent, TurnTimeout
from gateway.turn.memory import MemoryBook
from gateway.turn.prompt import PromptSection, build_system_prompt, render_sections, turn_prompt
from gateway.turn.states import TurnRun
from gateway.turn.steering import Steering

log = logging.getLogger(__name__)

INTERRUPTED_NOTE = "[This request was interrupted before an answer was given.]"
LOST_REPLY_NOTE = "[The answer to this request may have been lost when its process stopped.]"
EMPTY_ANSWER = "I have no answer to that. Try asking in another way."

__all__ = ["TurnJob", "TurnOutcome", "TurnRunner", "TypingIndicator", "user_content"]


@dataclass(frozen=True)
class TurnJob:
    """One stored message to run as a turn (gateway/store/inbox.py)."""

    inbound: Inbound
    key: SessionKey
    turn_id: str  # the stored message's id: the same on every run of this turn
    attempt: int = 1  # above 1: an earlier run stopped with its process
    reply: str | None = None  # that earlier run's reply record, when it was sent

    @classmethod
    def from_claimed(cls, claimed: Claimed) -> TurnJob:
        return cls(
            Inbound.model_validate_json(claimed.entry.payload),
            SessionKey.parse(claimed.session),
            claimed.entry.id,
            claimed.attempt,
            claimed.reply,
        )


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
        media: TurnMedia,
        planner: TurnPlanner,
        telemetry: Telemetry,
        prompt_sections: Sequence[PromptSection] = (),
        compactor: Compactor | None = None,
    ) -> None:
        self._settings = settings
        self._media = media  # the person's files: fetched, transcribed, shown to the model
        self._planner = planner  # the profile, models, limits and budget of each turn
        self._telemetry = telemetry
        self._agent = agent
        self._sessions = sessions
        self._memory = memory
        self._catalog = catalog
        self._outbox = outbox
        self._metrics = metrics
        # Rendered at every turn, so a section registered after this runner was built counts
        # and a section's text may change while a session runs (a skill was added).
        self._sections = prompt_sections
        self._streams = ReplyStreams(settings, outbox)
        # Without one, the oldest turns are dropped when history passes its budget.
        self._compactor = compactor or Compactor(None, None, settings.agent.history_token_budget)

    async def run(
        self,
        job: TurnJob,
        lease: TurnRun,
        *,
        context_lines: Sequence[str] = (),
        on_answering: Callable[[], None] | None = None,
        on_gathered: Callable[[], None] | None = None,
    ) -> TurnOutcome:
        """Run the turn and end it with one store round trip (history + lease release).

        `context_lines` are recent unaddressed group messages, oldest first;
        `on_answering` is called when the final reply is about to be delivered, `on_gathered`
        when the merge window closed (gateway/turn/steering.py).
        """
        inbound = job.inbound
        self._metrics.observe("queue_wait_seconds", max(time.time() - inbound.received_at, 0.0))
        with self._telemetry.span(
            "turn",
            **{"chat.platform": inbound.chat.platform, "session": str(job.key)},
        ) as span:
            steering = Steering(
                lease,
                inbound,
                steer=self._settings.router.busy_mode == "steer",
                merge_window=self._settings.router.merge_window_ms / 1000,
                acknowledge=self._acknowledge,
                on_gathered=on_gathered,
            )
            return await self._run(job, lease, context_lines, on_answering, span, steering)

    async def _run(
        self,
        job: TurnJob,
        lease: TurnRun,
        context_lines: Sequence[str],
        on_answering: Callable[[], None] | None,
        span: SpanRecorder,
        steering: Steering,
    ) -> TurnOutcome:
        inbound, key = job.inbound, job.key
        started, started_at = time.monotonic(), time.time()
        plan: TurnPlan | None = None
        if job.reply is None:  # a re-run whose reply went out is not planned (nor refused)
            try:
                plan = await self._planner.plan(inbound, key)
            except TurnRefused as exc:
                return await self._refuse(job, lease, exc, on_answering, span)
            span.set("profile", plan.profile)
        record = self._sessions.parse(lease.record)
        sections: list[str] | None = None  # rendered in _system_prompt unless here
        if record.is_new:
            # The new session's notes and this turn's prompt sections (the skills index) are
            # both store reads: one wait instead of two.
            notes, sections = await asyncio.gather(
                self._memory.notes(inbound.chat, inbound.sender),
                self._render_sections(record, inbound),
            )
            record.system = build_system_prompt(
                inbound.chat,
                inbound.sender,
                notes=notes.render(),
                extra=plan.instructions if plan else self._planner.instructions(inbound),
            )
        user_message: Message = {"role": "user", "content": user_content(inbound, context_lines)}
        history = [*record.messages, user_message]
        if plan is None:
            return await self._already_answered(job, lease, record, history)
        try:
            return await self._answer(
                job,
                lease,
                plan,
                record,
                history,
                sections,
                context_lines,
                on_answering,
                span,
                steering,
                since=(started, started_at),
            )
        except StaleTurn:
            await asyncio.shield(plan.settle())  # what the stale run used is spent all the same
            raise

    async def _answer(
        self,
        job: TurnJob,
        lease: TurnRun,
        plan: TurnPlan,
        record: SessionRecord,
        history: list[Message],
        sections: list[str] | None,
        context_lines: Sequence[str],
        on_answering: Callable[[], None] | None,
        span: SpanRecorder,
        steering: Steering,
        *,
        since: tuple[float, float],
    ) -> TurnOutcome:
        """The planned turn: run the agent, deliver the reply, save the conversation."""
        inbound, key = job.inbound, job.key
        started, started_at = since  # monotonic, wall clock
        typing = TypingIndicator(self._outbox, inbound.chat, self._settings.router.typing_delay)
        toolbox = self._catalog.toolbox(plan.scope, record.tools_loaded)
        stream = self._streams.open(
            inbound, toolbox.known(), typing, plan.model_settings, gate=_reply_gate(lease)
        )
        try:
            await steering.gather()
        except BaseException:
            if stream is not None:
                await asyncio.shield(stream.aclose())
            raise
        typing.start()
        outcome = TurnOutcome()
        iterations: int | None = None
        added: list[Message] = []
        try:
            prepared = await self._media.prepare(
                inbound, context_lines, record.messages, plan.vision
            )
            history[-1] = {"role": "user", "content": prepared.text}
            if prepared.answer is not None:  # nothing in the message the model could use
                outcome.reply = prepared.answer
                history.append({"role": "assistant", "content": prepared.answer})
            else:
                history = await self._compactor.compact(
                    record, history, inbound.chat, inbound.sender, str(key)
                )
                result = await self._agent.run(
                    await self._system_prompt(record, inbound, sections),
                    prepared.request(history),
                    toolbox,
                    self._context(job, lease, typing, stream, plan, prepared.outside),
                    catalog=self._catalog,
                    events=stream,
                    llm=plan.route,
                    limits=plan.limits,
                    steer=steering.take if steering.active else None,
                )
                added = result.new_messages
                history.extend(result.new_messages)
                record.prompt_tokens += result.usage.prompt_tokens
                record.completion_tokens += result.usage.completion_tokens
                outcome.reply = result.text.strip() or EMPTY_ANSWER
                iterations = result.iterations
        except LLMError as exc:
            log.warning("llm error session=%s error=%s", key, type(exc).__name__)
            outcome.error = exc.user_message
            span.fail(exc.kind, exc.detail)
        except TurnTimeout:
            outcome.error = (
                f"I ran out of time on this request (limit "
                f"{plan.limits.max_turn_seconds:.0f} s). Try a smaller request."
            )
        except asyncio.CancelledError:
            await asyncio.shield(plan.settle())  # what was used is spent, either way
            if lease.handing_over:
                # The process is stopping: the message stays for another run, which answers
                # it afresh, so what this one showed is taken back.
                if stream is not None:
                    await asyncio.shield(stream.aclose())
                raise
            outcome.cancelled = True  # stopped: saved below, then the cancellation goes on
        except BaseException:
            if stream is not None:
                await asyncio.shield(stream.aclose())  # no half answer stays on show
            raise
        finally:
            await typing.stop()
        record.tools_loaded = toolbox.loaded
        if outcome.cancelled:
            # What was written stays in history and on show, marked as interrupted.
            written = stream.written if stream is not None else ""
            text = f"{written}\n\n{INTERRUPTED_NOTE}" if written else INTERRUPTED_NOTE
            history.append({"role": "assistant", "content": text})
        else:
            text = await self._reply(
                job, lease, plan, prepared, outcome, history, stream, on_answering
            )
        # The one save of the turn: history, search document and the commit in one step. A
        # stopped turn's is shielded: /stop waits for it, so a /new right after is not undone
        # by a late save.
        saving = self._save(key, record, history, lease, self._doc(job, started_at, added, text))
        try:
            await (asyncio.shield(saving) if outcome.cancelled else saving)
        finally:
            if outcome.cancelled and stream is not None:
                await asyncio.shield(self._stop_stream(stream))
        if outcome.cancelled:
            raise asyncio.CancelledError
        await plan.settle()
        status = "ok" if outcome.ok else "error"
        self._telemetry.turn(plan.profile, status, time.monotonic() - started, iterations)
        return outcome

    async def _reply(
        self,
        job: TurnJob,
        lease: TurnRun,
        plan: TurnPlan,
        prepared: PreparedInput,
        outcome: TurnOutcome,
        history: list[Message],
        stream: ReplyStream | None,
        on_answering: Callable[[], None] | None,
    ) -> str:
        """Deliver the turn's answer (or its one line of failure) and record what went out;
        returns the text the turn ends with."""
        inbound = job.inbound
        if outcome.error is not None:
            # Keep the user's message so the next turn still has it in context.
            history.append({"role": "assistant", "content": f"[Not answered: {outcome.error}]"})
        if on_answering is not None:
            on_answering()
        await self._media.before_reply(inbound, prepared)
        text = outcome.reply or outcome.error or ""
        # A failed turn's line replaces whatever part of an answer was streamed.
        outcome.sent = await self._deliver(job, lease, text, stream, reply=plan.reply_to_message)
        if stream is not None and stream.updates:
            self._metrics.inc("stream_updates_total", stream.updates)
        if outcome.sent is not None:
            try:
                await lease.record_reply(outcome.sent, text)
            except StoreUnavailable as exc:
                log.error("reply not recorded session=%s error=%s", job.key, exc)
        if outcome.reply is not None and prepared.answer is None:
            await self._media.after_reply(inbound, prepared, outcome.reply)
        crash_point("before_finish")
        return text

    async def _acknowledge(self, inbound: Inbound) -> None:
        """Show the person that their message reached the running turn (a reaction)."""
        if inbound.message_id is None or not self._outbox.has(inbound.chat.platform):
            return
        try:
            await self._outbox.acknowledge(inbound.chat, inbound.message_id)
        except Exception as exc:  # cosmetic: the turn goes on without it
            log.debug("acknowledgement failed chat=%s error=%s", inbound.chat.address, exc)

    async def _refuse(
        self,
        job: TurnJob,
        lease: TurnRun,
        refused: TurnRefused,
        on_answering: Callable[[], None] | None,
        span: SpanRecorder,
    ) -> TurnOutcome:
        """A turn that may not run: say why; the message is not taken into history."""
        text = refused.user_message
        span.fail("refused", text)
        if on_answering is not None:
            on_answering()
        outcome = TurnOutcome(error=text)
        outcome.sent = await self._deliver(job, lease, text, None)
        try:
            await lease.commit(Batch(), lease.record)  # drops the message; history unchanged
        except StoreUnavailable as exc:
            log.error("refused message not dropped session=%s error=%s", job.key, exc)
        self._metrics.inc("turns_total", status="refused", profile=refused.profile)
        return outcome

    def _context(
        self,
        job: TurnJob,
        lease: TurnRun,
        typing: TypingIndicator,
        stream: ReplyStream | None,
        plan: TurnPlan,
        outside: tuple[str, ...] = (),
    ) -> ToolContext:
        inbound = job.inbound
        return ToolContext(
            session=job.key,
            chat=inbound.chat,
            user=inbound.sender,
            turn_id=job.turn_id,
            message_id=inbound.message_id,
            attachments=inbound.attachments,
            outside=outside,
            # A scheduled prompt was written by the model, not by a person this turn.
            user_text=inbound.text if inbound.kind is InboundKind.USER else "",
            typing=typing,
            stream=stream or NO_STREAM,
            fence=lease,
            scope=plan.scope,
            llm=plan.route,
            spin_off=plan.spin_off,
            images=(
                ShownImages(self._settings.media.max_image_px)
                if self._media.may_show_images(plan.vision)
                else None
            ),
        )

    async def _deliver(
        self,
        job: TurnJob,
        lease: TurnRun,
        text: str,
        stream: ReplyStream | None,
        *,
        reply: bool = True,
    ) -> SentRef | None:
        """The one final message of the turn: the streamed message becomes it, or it is sent.

        The message's reply slot is claimed first, with the run's token, so of two runs of
        one message only one ever sends; a crash between the claim and the send loses the
        reply (a re-run counts it), which a chat platform's lack of take-backs leaves as the
        one way to fail."""
        inbound = job.inbound
        reply_to = inbound.message_id if reply else None
        out = Outbound(chat=inbound.chat, text=text, reply_to=reply_to)
        try:
            earlier = await lease.claim_reply()
        except BaseException:
            if stream is not None:
                await asyncio.shield(stream.aclose())  # nothing of a stale run stays on show
            raise
        if earlier is not None:
            log.warning("reply slot claimed by another run; not sending session=%s", job.key)
            if stream is not None:
                await asyncio.shield(stream.aclose())
            return None
        crash_point("after_reply_claimed")
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

    async def _already_answered(
        self, job: TurnJob, lease: TurnRun, record: SessionRecord, history: list[Message]
    ) -> TurnOutcome:
        """A re-run of a turn whose reply went out before its process stopped: the reply is
        not sent again; the conversation is saved with it and the turn marked done."""
        assert job.reply is not None
        sent = json.loads(job.reply)
        if "message_id" not in sent:
            # The earlier run claimed the slot and stopped before it recorded a send: the
            # reply may never have gone out, and sending now could send it twice.
            self._metrics.inc("replies_lost_in_crash_total")
            log.error(
                "reply claimed by a run that stopped before recording it; it may be lost "
                "session=%s turn=%s",
                job.key,
                job.turn_id,
            )
        text = str(sent.get("text", LOST_REPLY_NOTE))
        # What that run took in was answered with it: the commit drops it too.
        lease.absorbed.extend(str(entry) for entry in sent.get("absorbed", []))
        log.info("reply already sent; not sending again session=%s turn=%s", job.key, job.turn_id)
        history.append({"role": "assistant", "content": text})
        await self._save(job.key, record, history, lease, self._doc(job, time.time(), [], text))
        message = SentRef(chat=job.inbound.chat, message_id=str(sent.get("message_id", "")))
        return TurnOutcome(reply=text, sent=message)

    async def _system_prompt(
        self, record: SessionRecord, inbound: Inbound, sections: list[str] | None
    ) -> str:
        if sections is None:
            sections = await self._render_sections(record, inbound)
        return turn_prompt(record.system, sections, summary_block(record))

    async def _render_sections(self, record: SessionRecord, inbound: Inbound) -> list[str]:
        if record.prompt_version < 2:  # older records hold their sections in `system`
            return []
        return await render_sections(self._sections, inbound.chat, inbound.sender)

    @staticmethod
    def _doc(job: TurnJob, started_at: float, added: list[Message], answer: str) -> SearchDoc:
        inbound = job.inbound
        return SearchDoc.build(
            job.turn_id,
            str(job.key),
            job.key.chat_scope,
            started_at,
            turn_text(inbound.text, added, answer),
        )

    async def _save(
        self,
        key: SessionKey,
        record: SessionRecord,
        history: list[Message],
        lease: TurnRun,
        doc: SearchDoc | None = None,
    ) -> None:
        record.messages = history
        record.turns += 1
        encoded = self._sessions.encode(record)
        try:
            # The search document goes with the commit: a turn that runs again replaces its
            # own (same id), and a /forget waiting for this turn to stop finds it indexed.
            await lease.commit(self._sessions.save_ops(key, record, encoded), encoded, doc)
        except StoreUnavailable as exc:
            log.error("history not saved session=%s error=%s", key, exc)


def _reply_gate(lease: TurnRun) -> Callable[[], Awaitable[bool]]:
    """What a reply stream asks before it shows anything: it may when this run holds the
    message's reply slot (a stale run's final delivery then stops it)."""

    async def may_show() -> bool:
        try:
            return await lease.claim_reply() is None
        except StaleTurn:
            return False

    return may_show
