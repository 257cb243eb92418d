"""ReplyStream against an in-memory platform: coalescing, the first delay, cuts at the limit,
tool lines, pauses, /stop, rate limits, refusals and failures, and the one final message."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from gateway.llm.types import ToolCall
from gateway.sdk.channels import Capabilities, DeliveryError, MessageGone, StreamSupport
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, Outbound, SentRef, UserRef
from gateway.streaming.progress import SecretScrubber
from gateway.streaming.protocol import StreamFrame, StreamRefused, StreamThrottled
from gateway.streaming.reply import ReplyStream, StreamPolicy
from gateway.streaming.textsplit import open_fence

CHAT = ChatRef(platform="mem", chat_id="c1", kind=ChatKind.GROUP)
ASKER = UserRef(platform="mem", user_id="u1")
INBOUND = Inbound(event_id="e1", chat=CHAT, sender=ASKER, text="hi", message_id="q1")


@dataclass
class Posted:
    text: str
    deleted: bool = False
    edits: int = 0


@dataclass
class MemoryPlatform:
    """Sends, edits and deletes kept in memory; `failures` are raised by the next edits."""

    max_len: int = 1000
    platform: str = "mem"
    messages: dict[str, Posted] = field(default_factory=dict)
    sends: list[Outbound] = field(default_factory=list)
    edit_failures: deque[Exception] = field(default_factory=deque)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def __post_init__(self) -> None:
        self.capabilities = Capabilities(
            max_len=self.max_len, streaming=StreamSupport(interval=0.02)
        )
        self._ids = itertools.count(1)

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def typing(self, chat: ChatRef) -> None: ...

    async def send(self, out: Outbound) -> SentRef:
        message_id = f"m{next(self._ids)}"
        self.messages[message_id] = Posted(out.text)
        self.sends.append(out)
        await self._notify()
        return SentRef(chat=out.chat, message_id=message_id)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        if self.edit_failures:
            raise self.edit_failures.popleft()
        posted = self.messages[ref.message_id]
        if posted.deleted:
            raise MessageGone("message to edit not found")
        posted.text = out.text
        posted.edits += 1
        await self._notify()

    async def delete(self, ref: SentRef) -> None:
        self.messages[ref.message_id].deleted = True
        await self._notify()

    def shown(self) -> list[str]:
        return [m.text for m in self.messages.values() if not m.deleted]

    async def until(self, predicate: Callable[[], bool]) -> None:
        async with asyncio.timeout(5), self.changed:
            await self.changed.wait_for(predicate)

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()


@dataclass
class ScriptedHandle:
    """A native handle whose updates raise what the test scripts, else record the frame."""

    platform: MemoryPlatform
    raises: deque[Exception] = field(default_factory=deque)
    frames: list[tuple[float, StreamFrame]] = field(default_factory=list)
    limit: int = 1000
    refresh: float | None = None

    async def update(self, frame: StreamFrame) -> None:
        if self.raises:
            raise self.raises.popleft()
        self.frames.append((asyncio.get_running_loop().time(), frame))
        await self.platform._notify()

    async def finish(self, text: str) -> SentRef:
        return await self.platform.send(Outbound(chat=CHAT, text=text))

    async def abort(self) -> None:
        return None


@dataclass
class NativePlatform(MemoryPlatform):
    handle: ScriptedHandle | None = None
    opened: int = 0

    def open_stream(
        self, chat: ChatRef, *, reply_to: str | None, recipient: UserRef | None
    ) -> ScriptedHandle | None:
        self.opened += 1
        return self.handle


class CountingTyping:
    def __init__(self) -> None:
        self.held = 0

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        self.held += 1
        try:
            yield
        finally:
            self.held -= 1


def stream_for(
    platform: MemoryPlatform,
    *,
    first_delay: float = 0.0,
    progress: str = "tools",
    show_reasoning: bool = False,
    typing: CountingTyping | None = None,
) -> ReplyStream:
    policy = StreamPolicy(0.02, first_delay, progress, show_reasoning)  # type: ignore[arg-type]
    support = platform.capabilities.streaming
    assert support is not None
    return ReplyStream(
        platform,
        support,
        INBOUND,
        policy,
        tools={},
        scrub=SecretScrubber(),
        typing=typing or CountingTyping(),
    )


async def write(stream: ReplyStream, text: str, step: int = 3) -> None:
    for i in range(0, len(text), step):
        await stream.text(text[i : i + step])
        await asyncio.sleep(0.001)


ANSWER = "The quick brown fox jumps over the lazy dog. " * 6


async def test_deltas_are_coalesced_and_the_message_becomes_the_answer() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await write(stream, ANSWER, step=1)
    ref = await stream.finish(ANSWER.strip())
    assert platform.shown() == [ANSWER.strip()]
    assert len(platform.sends) == 1 and platform.sends[0].reply_to == "q1"
    assert 1 <= platform.messages[ref.message_id].edits < len(ANSWER) // 4


async def test_a_reply_done_within_the_first_delay_is_sent_whole() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform, first_delay=10.0)
    await write(stream, ANSWER)
    await stream.finish(ANSWER.strip())
    assert platform.shown() == [ANSWER.strip()]
    assert stream.updates == 0 and all(m.edits == 0 for m in platform.messages.values())


async def test_a_long_reply_goes_on_in_new_messages_with_fences_intact() -> None:
    platform = MemoryPlatform(max_len=300)
    code = "\n".join(f"value_{n} = {n}" for n in range(60))
    text = f"Here it is:\n\n```python\n{code}\n```\n\nThat is the code."
    stream = stream_for(platform)
    await write(stream, text, step=7)
    await stream.finish(text)
    parts = platform.shown()
    assert len(parts) >= 4 and all(len(p) <= 300 for p in parts)
    assert all(open_fence(p) is None for p in parts)  # every message renders on its own
    assert all(p.startswith("```python\n") for p in parts[1:-1])
    joined = "\n".join(parts)
    assert all(joined.count(f"value_{n} = {n}\n") == 1 for n in range(59))
    assert parts[-1].endswith("That is the code.")
    assert [o.reply_to for o in platform.sends] == ["q1"] + [None] * (len(parts) - 1)


async def test_tool_lines_replace_prose_and_the_answer_replaces_them() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await write(stream, "Let me check the folder.")
    await platform.until(lambda: platform.shown() == ["Let me check the folder."])
    call = ToolCall("t1", "shell", '{"command": "ls -la"}')
    await stream.tool_calls([call])
    await platform.until(lambda: platform.shown() == ["Running shell: `ls -la`"])
    await stream.tool_result(call, "total 0")
    await write(stream, "It is empty.")
    await stream.finish("It is empty.")
    assert platform.shown() == ["It is empty."]
    assert len(platform.sends) == 1


async def test_verbose_progress_marks_finished_calls() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform, progress="verbose")
    ok, bad = ToolCall("a", "glob", '{"pattern": "*.md"}'), ToolCall("b", "shell", "{}")
    await stream.tool_calls([ok, bad])
    await stream.tool_result(ok, "notes.md")
    await stream.tool_result(bad, "error: no command")
    expected = "Running glob: pattern=`*.md` ✓\nRunning shell ✗"
    await platform.until(lambda: platform.shown() == [expected])
    await stream.finish("Done.")


async def test_pause_finishes_the_answer_so_far_and_the_rest_goes_below() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await write(stream, "Part one.")
    await platform.until(lambda: platform.shown() == ["Part one."])
    async with stream.paused():
        await platform.send(Outbound(chat=CHAT, text="Approve?"))
        await write(stream, " Part two.")  # held while paused
        assert platform.shown() == ["Part one.", "Approve?"]
    await stream.finish("Part one. Part two.")
    assert platform.shown() == ["Part one.", "Approve?", "Part two."]


async def test_pause_takes_back_a_message_of_tool_lines_only() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await stream.tool_calls([ToolCall("t", "shell", '{"command": "rm -rf build"}')])
    await platform.until(lambda: bool(platform.shown()))
    async with stream.paused():
        assert platform.shown() == []
        await platform.send(Outbound(chat=CHAT, text="Approve?"))
    await stream.finish("Cleaned.")
    assert platform.shown()[0] == "Approve?" and platform.shown()[-1] == "Cleaned."


async def test_stop_ends_with_what_was_written() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await write(stream, "Here is\n```py\nx = 1")
    await platform.until(lambda: bool(platform.shown()))
    await stream.stop()
    assert stream.written == "Here is\n```py\nx = 1"
    assert platform.shown() == ["Here is\n```py\nx = 1\n```\n\n(stopped)"]


async def test_stop_before_anything_showed_sends_nothing() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform, first_delay=10.0)
    await write(stream, "Some words")
    await stream.stop()
    assert stream.written == "Some words"
    assert platform.shown() == []


async def test_a_crashed_turn_takes_back_its_half_answer() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await write(stream, "A half-written ans")
    await platform.until(lambda: bool(platform.shown()))
    await stream.aclose()
    assert platform.shown() == []


async def test_rate_limit_slows_the_stream_and_the_final_still_arrives() -> None:
    platform = NativePlatform()
    handle = ScriptedHandle(platform, raises=deque([StreamThrottled("429", 0.3)]))
    platform.handle = handle
    stream = stream_for(platform)
    started = asyncio.get_running_loop().time()
    await write(stream, ANSWER[:40], step=2)
    await platform.until(lambda: bool(handle.frames))
    # Nothing is shown while asked to wait. uvloop's clock counts whole milliseconds, so an
    # exact 0.3 s can subtract to 0.29999...; allow that one tick and no more.
    assert handle.frames[0][0] - started >= 0.3 - 0.001
    await stream.finish(ANSWER.strip())
    assert platform.shown() == [ANSWER.strip()]


async def test_refused_native_streaming_falls_back_to_post_and_edit() -> None:
    platform = NativePlatform()
    platform.handle = ScriptedHandle(platform, raises=deque([StreamRefused("no drafts")]))
    stream = stream_for(platform)
    await write(stream, "Some text")
    await platform.until(lambda: platform.shown() == ["Some text"])
    await write(stream, " and more")
    await stream.finish("Some text and more")
    assert platform.shown() == ["Some text and more"]
    assert platform.opened == 1  # not asked again in this reply


async def test_a_permanent_failure_stops_streaming_and_the_answer_goes_whole() -> None:
    platform = NativePlatform()
    broken = DeliveryError("bot was blocked", permanent=True)
    platform.handle = ScriptedHandle(platform, raises=deque([broken]))
    stream = stream_for(platform)
    await write(stream, ANSWER)
    await stream.finish(ANSWER.strip())
    assert platform.shown() == [ANSWER.strip()]
    assert stream.updates == 0


async def test_a_final_edit_that_fails_is_sent_as_a_new_message() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await write(stream, "Draft text")
    await platform.until(lambda: platform.shown() == ["Draft text"])
    platform.edit_failures.append(DeliveryError("timed out"))
    await stream.finish("Final text")
    assert platform.shown()[-1] == "Final text"


async def test_a_deleted_message_is_posted_again() -> None:
    platform = MemoryPlatform()
    stream = stream_for(platform)
    await write(stream, "First words")
    await platform.until(lambda: bool(platform.shown()))
    next(iter(platform.messages.values())).deleted = True
    await write(stream, " and the rest")
    await stream.finish("First words and the rest")
    assert platform.shown() == ["First words and the rest"]


async def test_reasoning_shows_only_when_asked_and_gives_way_to_the_answer() -> None:
    platform = MemoryPlatform()
    hidden = stream_for(platform)
    await hidden.reasoning("secret plan")
    await asyncio.sleep(0.05)
    assert platform.shown() == []
    await hidden.finish("ok")
    shown = stream_for(platform := MemoryPlatform(), show_reasoning=True)
    await shown.reasoning("first I will")
    await platform.until(lambda: platform.shown() == ["Thinking…\n> first I will"])
    await write(shown, "The answer.")
    await shown.finish("The answer.")
    assert platform.shown() == ["The answer."]


async def test_typing_is_held_while_a_message_is_being_written() -> None:
    platform = MemoryPlatform()
    typing = CountingTyping()
    stream = stream_for(platform, typing=typing)
    await write(stream, "Words")
    await platform.until(lambda: bool(platform.shown()))
    assert typing.held == 1
    await stream.finish("Words")
    assert typing.held == 0
