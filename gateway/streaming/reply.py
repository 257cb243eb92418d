"""A reply shown while the model writes it: one `ReplyStream` per turn, fed by the agent.

The agent reports text deltas, reasoning, tool calls and their results (`AgentEvents`);
the stream keeps what the person should see now (the answer so far, or a line per tool
call before the answer starts) and a background task shows it through the platform's
`StreamHandle`, at most once per interval, coalescing everything in between. Text that
passes the platform's limit finishes the message and goes on in a new one. Tools that
send their own message (approvals, questions) pause the stream; the final answer is
delivered by `finish`, exactly once, and `stop` ends a cancelled turn with "(stopped)".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, replace
from typing import Any, Literal

from gateway.llm.types import ToolCall
from gateway.sdk.channels import Adapter, DeliveryError, StreamSupport
from gateway.sdk.messages import ChatRef, Inbound, Outbound, SentRef
from gateway.sdk.tooling import ToolSpec, TypingControl
from gateway.streaming.edits import EditStream
from gateway.streaming.holdback import CallHoldback
from gateway.streaming.progress import SecretScrubber, describe_call
from gateway.streaming.protocol import (
    ProgressLine,
    StreamFrame,
    StreamHandle,
    StreamingAdapter,
    StreamRefused,
    StreamThrottled,
)
from gateway.streaming.split import Cut, close_fences, cut
from gateway.streaming.textsplit import open_fence

log = logging.getLogger(__name__)

STOPPED_NOTE = "(stopped)"
MAX_PROGRESS_LINES = 8  # the most recent ones; older calls are counted, not listed
REASONING_TAIL = 600  # characters of reasoning shown (show_reasoning)
MAX_THROTTLE_WAIT = 30.0  # the final message waits at most this long for a rate limit


@dataclass(frozen=True)
class StreamPolicy:
    interval: float  # seconds between two updates of one message
    first_delay: float  # a reply done within this long of its first words is sent whole
    progress: Literal["off", "tools", "verbose"]
    show_reasoning: bool


class ReplyStream:
    """One turn's reply while it is written; the agent's events in, platform updates out."""

    def __init__(
        self,
        adapter: Adapter,
        support: StreamSupport,
        inbound: Inbound,
        policy: StreamPolicy,
        *,
        tools: Mapping[str, ToolSpec[Any]],
        scrub: SecretScrubber,
        typing: TypingControl,
        holdback: CallHoldback | None = None,
        gate: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self._adapter = adapter
        # Asked once, before anything is shown: may this run show its reply at all (it holds
        # the message's reply slot)? No: nothing is shown early.
        self._gate = gate
        self._support = support
        self._chat = inbound.chat
        self._reply_to = inbound.message_id
        self._recipient = inbound.sender
        self._policy = policy
        self._tools = tools
        self._scrub = scrub
        self._typing = typing
        self._holdback = holdback
        self._native = isinstance(adapter, StreamingAdapter)
        # What is written: the answer (earlier messages hold answer[:base]), tool lines.
        self._answer = ""
        self._base = 0
        self._reopen = ""  # the code fence the current message reopens, if a cut fell in one
        self._progress: dict[str, ProgressLine] = {}
        self._reasoning = ""
        # What is shown.
        self._handle: StreamHandle | None = None
        self._live = False  # the current message shows something
        self._last: StreamFrame | None = None
        self._settled: list[SentRef] = []  # earlier messages of this reply
        self._fresh = True  # the current message waits `first_delay` before it appears
        self._first_at: float | None = None
        self._last_push = 0.0
        self._not_before = 0.0  # a rate limit's wait
        # Control.
        self._paused = 0
        self._closed = False
        self._broken = False  # the platform refused for good; the answer goes out whole
        self._dirty = asyncio.Event()
        self._lock = asyncio.Lock()
        self._pump: asyncio.Task[None] | None = None
        self._typing_hold: AsyncExitStack | None = None
        self.updates = 0  # frames shown, for metrics and the benchmark

    @property
    def chat(self) -> ChatRef:
        return self._chat

    @property
    def written(self) -> str:
        """The answer text written so far (what a stopped turn leaves in its history)."""
        return self._answer.strip()

    # -- what the agent reports (gateway.turn.agent.AgentEvents) -------------------------------

    async def text(self, delta: str) -> None:
        if self._holdback is not None:
            delta = self._holdback.feed(delta)
        if delta:
            self._answer += delta
            self._changed()

    async def reasoning(self, delta: str) -> None:
        if self._policy.show_reasoning and delta:
            self._reasoning = (self._reasoning + delta)[-REASONING_TAIL:]
            self._changed()

    async def tool_calls(self, calls: Sequence[ToolCall]) -> None:
        # The text of a completion that asks for tools was not the answer: it goes.
        self._answer = self._answer[: self._base]
        self._reopen = ""  # the next text starts afresh, not inside an earlier code block
        self._reasoning = ""
        if self._holdback is not None:
            self._holdback.reset()
        if self._policy.progress != "off":
            verbose = self._policy.progress == "verbose"
            for call in calls:
                spec = self._tools.get(call.name)
                text = describe_call(call, spec, self._scrub, verbose=verbose)
                self._progress[call.id] = ProgressLine(call.id, text)
        self._changed()

    async def tool_result(self, call: ToolCall, output: str) -> None:
        line = self._progress.get(call.id)
        if line is not None:
            state: Literal["done", "failed"] = "failed" if output.startswith("error:") else "done"
            self._progress[call.id] = replace(line, state=state)
            self._changed()

    # -- what tools and the turn runner do -----------------------------------------------

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """Finish the message being written, hold updates, and go on in a new message after."""
        self._paused += 1
        try:
            if self._paused == 1:
                async with self._lock:
                    if not self._closed:
                        await self._put_aside()
            yield
        finally:
            self._paused -= 1
            if not self._paused and not self._closed and self._frame() is not None:
                self._first_at = None
                self._changed()

    async def finish(self, text: str) -> SentRef:
        """Deliver the final reply: the message being written becomes it (or it is sent as
        usual when nothing was shown). Raises DeliveryError when it could not be delivered."""
        await self._halt()
        async with self._lock:
            try:
                return await self._final(text)
            finally:
                await self._close()

    async def stop(self) -> None:
        """End a cancelled turn's reply with what was written and "(stopped)"."""
        await self._halt()
        async with self._lock:
            try:
                text, _ = self._current()
                if self._handle is not None and self._live:
                    if text.strip():
                        await self._handle.finish(f"{close_fences(text)}\n\n{STOPPED_NOTE}")
                    else:
                        await self._handle.abort()
            except DeliveryError as exc:
                log.info("stopped reply not shown chat=%s error=%s", self._chat.address, exc)
            finally:
                await self._close()

    async def aclose(self) -> None:
        """After a turn that neither finished nor stopped (it crashed): take back what shows."""
        if self._closed:
            return
        await self._halt()
        async with self._lock:
            if self._handle is not None and self._live:
                await self._handle.abort()
            await self._close()

    # -- the pump ----------------------------------------------------------------------------

    def _changed(self) -> None:
        if self._closed or self._broken:
            return
        loop = asyncio.get_running_loop()
        if self._first_at is None:
            self._first_at = loop.time()
        self._dirty.set()
        if self._pump is None:
            self._pump = asyncio.create_task(self._run(), name=f"stream {self._chat.address}")

    async def _run(self) -> None:
        try:
            await self._pump_updates()
        except Exception:  # a bug here must not fail the turn: the answer still goes out whole
            log.exception("streaming failed chat=%s", self._chat.address)
            self._broken = True

    async def _pump_updates(self) -> None:
        loop = asyncio.get_running_loop()
        while not (self._closed or self._broken):
            refresh = self._handle.refresh if self._handle is not None and self._live else None
            force = False
            try:
                async with asyncio.timeout(refresh):
                    await self._dirty.wait()
            except TimeoutError:
                force = True  # an unchanged draft is shown again before it expires
            wait = self._due() - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self._dirty.clear()
            if self._paused:
                continue  # the end of the pause wakes the pump again
            async with self._lock:
                if not (self._paused or self._closed or self._broken):
                    await self._push(force)

    def _due(self) -> float:
        if self._fresh:
            start = (self._first_at or 0.0) + self._policy.first_delay
        else:
            start = self._last_push + self._policy.interval
        return max(start, self._not_before)

    async def _push(self, force: bool) -> None:
        if self._gate is not None:
            gate, self._gate = self._gate, None
            if not await gate():
                self._broken = True
                return
        # Whole messages' worth of text first: each is finished, the rest goes on in a new one.
        while True:
            text, shift = self._current()
            handle = self._handle or self._open()
            if handle is None:
                return
            piece = cut(text, handle.limit, self._support.measure) if text.strip() else None
            if piece is None:
                break
            if not await self._finish_part(handle, piece, shift):
                return
        frame = self._frame()
        if frame is None or (frame == self._last and not force):
            return
        await self._show(handle, frame)

    async def _finish_part(self, handle: StreamHandle, piece: Cut, shift: int) -> bool:
        try:
            ref = await handle.finish(piece.head)
        except DeliveryError as exc:
            self._failed(exc, "part")
            return False
        self._settled.append(ref)
        self._base = max(self._base, self._base + shift + piece.consumed)
        self._reopen = piece.reopen
        self._handle, self._live, self._last = None, False, None
        return True

    async def _show(self, handle: StreamHandle, frame: StreamFrame) -> None:
        loop = asyncio.get_running_loop()
        try:
            await handle.update(frame)
        except StreamThrottled as exc:
            log.info("stream slowed down chat=%s wait=%.1f", self._chat.address, exc.retry_after)
            self._not_before = loop.time() + exc.retry_after
            self._dirty.set()
            return
        except StreamRefused as exc:
            log.info("native streaming refused; editing instead chat=%s error=%s", self._chat, exc)
            self._native = False
            self._handle = None
            fallback = self._open()
            if fallback is not None:
                await self._show(fallback, frame)
            return
        except DeliveryError as exc:
            self._failed(exc, "update")
            return
        self._handle, self._live, self._last = handle, True, frame
        self._fresh = False
        self._last_push = loop.time()
        self.updates += 1
        await self._hold_typing()

    def _failed(self, exc: DeliveryError, what: str) -> None:
        if exc.permanent:
            log.warning("streaming stopped chat=%s error=%s", self._chat.address, exc)
            self._broken = True
        else:  # this frame is lost; the next one carries everything
            log.info("stream %s not shown chat=%s error=%s", what, self._chat.address, exc)
            self._dirty.set()

    def _open(self) -> StreamHandle | None:
        """A handle for the next message; later messages do not quote the question."""
        reply_to = None if self._settled or self._live else self._reply_to
        handle: StreamHandle | None = None
        if self._native and isinstance(self._adapter, StreamingAdapter):
            handle = self._adapter.open_stream(
                self._chat, reply_to=reply_to, recipient=self._recipient
            )
        if handle is None and self._support.edits:
            handle = EditStream(self._adapter, self._chat, reply_to)
        if handle is None:
            self._broken = True  # nothing can show this chat's reply early
        self._handle = handle
        return handle

    # -- what is shown -------------------------------------------------------------------

    def _current(self) -> tuple[str, int]:
        """The current message's text, and where it starts in the answer relative to base."""
        rest = self._answer[self._base :]
        if self._reopen:
            return self._reopen + rest, -len(self._reopen)
        stripped = rest.lstrip()
        return stripped, len(rest) - len(stripped)

    def _frame(self) -> StreamFrame | None:
        text, _ = self._current()
        lines = tuple(self._progress.values()) if self._policy.progress != "off" else ()
        if text.strip():
            return StreamFrame(close_fences(text), text, lines)
        if lines:
            return StreamFrame(self._progress_text(lines), "", lines)
        if self._reasoning.strip():
            quoted = "\n".join(f"> {line}" for line in self._reasoning.strip().splitlines())
            return StreamFrame(f"Thinking…\n{quoted}")
        return None

    def _progress_text(self, lines: tuple[ProgressLine, ...]) -> str:
        shown = lines[-MAX_PROGRESS_LINES:]
        marks = {"running": "", "done": " ✓", "failed": " ✗"}
        verbose = self._policy.progress == "verbose"
        rows = [line.text + (marks[line.state] if verbose else "") for line in shown]
        if len(lines) > len(shown):
            rows.insert(0, f"({len(lines) - len(shown)} earlier steps)")
        return "\n".join(rows)

    # -- pausing, the end ----------------------------------------------------------------

    async def _put_aside(self) -> None:
        """Before a tool's own message: finish what is shown, or take back mere tool lines."""
        handle = self._handle
        if handle is not None and self._live:
            text, _ = self._current()
            if text.strip():
                try:
                    self._settled.append(await handle.finish(close_fences(text)))
                except DeliveryError as exc:
                    log.info("paused reply not finished chat=%s error=%s", self._chat, exc)
                self._base = len(self._answer)
                opener = open_fence(text)
                self._reopen = f"{opener}\n" if opener else ""
            else:
                await handle.abort()
        self._handle, self._live, self._last = None, False, None
        self._fresh, self._first_at = True, None
        await self._release_typing()

    async def _final(self, text: str) -> SentRef:
        if not self._live and not self._settled:
            # Nothing was shown: the answer goes out as any message does.
            out = Outbound(chat=self._chat, text=text, reply_to=self._reply_to)
            return await self._adapter.send(out)
        settled = self._answer[: self._base]
        if self._base and text.startswith(settled):
            rest = text[self._base :]
            body = self._reopen + rest if self._reopen else rest.lstrip()
        else:
            body = text  # earlier parts were not the answer's start (or there are none)
        if not body.strip():
            if self._handle is not None and self._live:
                await self._handle.abort()
            return self._settled[-1]
        await self._throttle_wait()
        while True:
            handle = self._handle or self._open() or EditStream(self._adapter, self._chat, None)
            piece = cut(body, handle.limit, self._support.measure)
            ref = await self._deliver_part(handle, piece.head if piece else body)
            if piece is None:
                return ref
            body = piece.reopen + body[piece.consumed :]
            self._settled.append(ref)
            self._handle, self._live = None, False

    async def _deliver_part(self, handle: StreamHandle, text: str) -> SentRef:
        try:
            return await handle.finish(text)
        except DeliveryError as exc:
            if exc.permanent:
                raise
            # The streamed message could not become the answer; send the answer on its own.
            log.warning("streamed reply not finished; sending it chat=%s error=%s", self._chat, exc)
            return await self._adapter.send(Outbound(chat=self._chat, text=text))

    async def _throttle_wait(self) -> None:
        wait = self._not_before - asyncio.get_running_loop().time()
        if wait > 0:
            await asyncio.sleep(min(wait, MAX_THROTTLE_WAIT))

    async def _halt(self) -> None:
        """Stop the pump; an update already under way completes first."""
        task, self._pump = self._pump, None
        if task is None:
            return
        async with self._lock:
            task.cancel()
        await asyncio.wait({task})

    async def _close(self) -> None:
        self._closed = True
        self._handle, self._live = None, False
        await self._release_typing()

    async def _hold_typing(self) -> None:
        # A message being written says enough; "typing…" on top of it would be noise.
        if self._typing_hold is None:
            stack = AsyncExitStack()
            await stack.enter_async_context(self._typing.paused())
            self._typing_hold = stack

    async def _release_typing(self) -> None:
        stack, self._typing_hold = self._typing_hold, None
        if stack is not None:
            await stack.aclose()
