"""clarify: buttons or numbered text, answers by press or typed message, only from the asker,
across processes, and a clear result on timeout."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from gateway.approvals.seals import EntrySigner
from gateway.intake.admission import Admission, Intake, Status, Submission, finished
from gateway.sdk.channels import Capabilities, Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.messages import (
    ButtonPress,
    ChatKind,
    ChatRef,
    Inbound,
    Outbound,
    PressReply,
    SentRef,
    UserRef,
)
from gateway.sdk.tooling import ToolContext, ToolError
from gateway.sessions.key import SessionKey
from gateway.store.base import Store
from gateway.store.inbox import IntakeResult
from gateway.store.redis import RedisStore
from tools.agent.clarify import EXPIRED, ClarifyArgs, ClarifyService

CHAT = ChatRef(platform="fake", chat_id="c1", kind=ChatKind.GROUP)
ANA = UserRef(platform="fake", user_id="ana", display_name="Ana")
BO = UserRef(platform="fake", user_id="bo", display_name="Bo")
SESSION = SessionKey("fake", "c1")
CTX = ToolContext(session=SESSION, chat=CHAT, user=ANA, message_id="m0")
NOT_STORED = Intake()  # what admission hands on for a command-shaped message
SIGNER = EntrySigner(b"clarify test key" * 2)  # shared by every node, as by replicas


class FakeAdapter:
    platform = "fake"

    def __init__(self, *, buttons: bool = True) -> None:
        self.capabilities = Capabilities(max_len=4000, buttons=buttons)
        self.sent: list[Outbound] = []
        self.edits: list[tuple[SentRef, Outbound]] = []
        self._ids = itertools.count(1)
        self._sent_one = asyncio.Event()

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, out: Outbound) -> SentRef:
        self.sent.append(out)
        self._sent_one.set()
        return SentRef(chat=out.chat, message_id=str(next(self._ids)))

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        self.edits.append((ref, out))

    async def typing(self, chat: ChatRef) -> None: ...

    async def question(self, count: int = 1) -> Outbound:
        """The latest message, once at least `count` have been sent."""
        async with asyncio.timeout(5):
            while True:
                self._sent_one.clear()
                if len(self.sent) >= count:
                    return self.sent[-1]
                await self._sent_one.wait()


class Node:
    """One gateway process: its own outbox, extensions and ClarifyService."""

    def __init__(self, store: Store, *, buttons: bool = True, **options: Any) -> None:
        self.adapter = FakeAdapter(buttons=buttons)
        outbox = Outbox()
        outbox.register(self.adapter)
        self.extensions = Extensions()
        self.service = ClarifyService(store, outbox, SIGNER, **options)
        self.service.register(self.extensions)
        (self.tool,) = self.service.specs()

    def ask(self, question: str, choices: list[str] | None = None, ctx: ToolContext = CTX) -> Any:
        args = ClarifyArgs(question=question, choices=choices or [])
        # The handler is typed as returning an Awaitable, which create_task does not take.
        return asyncio.ensure_future(self.tool.handler(args, ctx))

    async def press(self, data: str, user: UserRef = ANA, chat: ChatRef = CHAT) -> PressReply:
        return await self.extensions.press(
            ButtonPress(event_id=uuid.uuid4().hex, chat=chat, user=user, data=data)
        )

    async def type(self, text: str, user: UserRef = ANA, intake: Intake = NOT_STORED) -> bool:
        """Type a message; `intake` is what the store said (default: not stored, a command)."""
        inbound = Inbound(
            event_id=uuid.uuid4().hex, chat=CHAT, sender=user, text=text, mentioned=True
        )
        (middleware,) = self.extensions.middlewares("questions")

        async def queue(admission: Admission) -> Submission:
            return finished(Status.QUEUED, session=admission.session)

        submission = await middleware(Admission(inbound, SESSION, "t1", intake=intake), queue)
        return submission.status is Status.ANSWERED


@pytest_asyncio.fixture
async def node(embedded_store: Store) -> AsyncIterator[Node]:
    n = Node(embedded_store, timeout=5)
    yield n
    await n.service.close()


async def test_buttons_and_a_press_from_the_asker(node: Node) -> None:
    task = node.ask("Which branch should I deploy?", ["main", "staging"])
    question = await node.adapter.question()
    assert question.text.startswith("Question for Ana: Which branch should I deploy?")
    assert question.reply_to == "m0"
    (row,) = question.buttons
    assert [b.label for b in row] == ["main", "staging"]
    assert all(b.data.startswith("cq:") and b.data.endswith((":0", ":1")) for b in row)
    reply = await node.press(row[1].data)
    assert reply.toast == "Answered: staging" and not reply.alert
    assert reply.edit_text is not None and "→ staging (Ana)" in reply.edit_text
    assert await task == "Ana answered: staging"
    again = await node.press(row[0].data)
    assert again.toast == EXPIRED and again.alert


async def test_only_the_asker_may_answer(node: Node) -> None:
    task = node.ask("Delete the old logs?", ["yes", "no"])
    (row,) = (await node.adapter.question()).buttons
    refused = await node.press(row[0].data, user=BO)
    assert refused.alert and refused.toast == "Only Ana can answer this."
    assert await node.type("yes please", user=BO) is False  # queued as a normal message
    other_chat = CHAT.model_copy(update={"chat_id": "c2"})
    assert (await node.press(row[0].data, chat=other_chat)).alert
    assert not task.done()
    assert await node.type("no, keep them") is True
    assert await task == "Ana answered: no, keep them"


async def test_anyone_in_the_chat_may_answer_when_configured(embedded_store: Store) -> None:
    node = Node(embedded_store, timeout=5, answer_by="chat")
    task = node.ask("Lunch at noon?", ["ok", "later"])
    (row,) = (await node.adapter.question()).buttons
    assert (await node.press(row[1].data, user=BO)).toast == "Answered: later"
    assert await task == "Bo answered: later"


async def test_text_fallback_without_buttons(embedded_store: Store) -> None:
    node = Node(embedded_store, buttons=False, timeout=5)
    task = node.ask("Which colour?", ["red", "blue"])
    question = await node.adapter.question()
    assert question.buttons == ()
    assert "1. red\n2. blue\n\nReply with a number or your own answer." in question.text
    assert await node.type(" 2 ") is True
    assert await task == "Ana answered: blue"


async def test_no_open_question_lets_messages_through(node: Node) -> None:
    assert await node.type("hello") is False


async def test_a_message_to_an_idle_session_is_never_taken_as_an_answer(node: Node) -> None:
    """A question is open only while its turn runs (the session's lease held). One left in
    the store with no turn running (its process died) must not swallow the next message."""
    task = node.ask("Which colour?", ["red", "blue"])
    await node.adapter.question()
    idle = Intake(stored=IntakeResult("stored", queued=1))
    assert await node.type("red", intake=idle) is False
    busy = Intake(stored=IntakeResult("stored", queued=2, holder="gw-1:abc"))
    assert await node.type("red", intake=busy) is True
    assert await task == "Ana answered: red"


async def test_timeout_gives_a_clear_result(embedded_store: Store) -> None:
    node = Node(embedded_store, timeout=0.3)
    task = node.ask("Are you there?", ["yes"])
    (row,) = (await node.adapter.question()).buttons
    result = await task
    assert result.startswith("No answer: nobody answered within 0 s.")
    ((_ref, edited),) = node.adapter.edits
    assert edited.text == "Are you there?\n\n(No answer in time.)"
    assert (await node.press(row[0].data)).toast == EXPIRED
    assert await node.type("yes") is False


async def test_one_question_at_a_time_and_not_from_subagents(node: Node) -> None:
    first = node.ask("First?")
    await node.adapter.question()
    with pytest.raises(ToolError, match="already waiting"):
        await node.ask("Second?")
    with pytest.raises(ToolError, match="sub-agent cannot ask"):
        await node.ask(
            "Q?", ctx=ToolContext(session=SESSION, chat=CHAT, user=ANA, is_subagent=True)
        )
    assert await node.type("done") is True
    assert await first == "Ana answered: done"


@pytest.mark.redis
async def test_the_answer_can_land_on_another_process(redis_url: str) -> None:
    prefix = f"test-{uuid.uuid4().hex[:8]}"
    store_a = RedisStore(redis_url, key_prefix=prefix)
    store_b = RedisStore(redis_url, key_prefix=prefix)
    asker, other = Node(store_a, timeout=10), Node(store_b, timeout=10)
    try:
        task = asker.ask("Ship it?", ["ship", "wait"])
        (row,) = (await asker.adapter.question()).buttons
        assert (await other.press(row[0].data, user=BO)).alert  # still only the asker
        reply = await other.press(row[0].data)
        assert reply.toast == "Answered: ship"
        async with asyncio.timeout(3):  # pub/sub wakes it; polling would take 2 s
            assert await task == "Ana answered: ship"
        typed = asker.ask("And the version?")
        await asker.adapter.question(count=2)
        assert await other.type("v2") is True  # the typed answer reaches another replica
        assert await typed == "Ana answered: v2"
    finally:
        for n in (asker, other):
            await n.service.close()
        await store_a.close()
        await store_b.close()


@pytest.mark.parametrize("index", ["-1", "x", "2", " 1"])
async def test_a_forged_choice_index_is_refused_and_the_question_stays_open(
    node: Node, index: str
) -> None:
    task = node.ask("Which colour?", ["red", "blue"])
    (row,) = (await node.adapter.question()).buttons
    question_id = row[0].data.split(":")[1]
    refused = await node.press(f"cq:{question_id}:{index}")
    assert refused.alert and not task.done()
    # -1 would be the last choice if it were taken as a list index.
    assert (await node.press(row[0].data)).toast == "Answered: red"
    assert await task == "Ana answered: red"
