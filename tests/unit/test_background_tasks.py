"""The background task registry alone, on the embedded store: records, the per-chat cap, the
outcome handed to the session once, cancelling, and the sweep that finds tasks whose process
stopped (gracefully or not) and tells their chats."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from gateway.intake.admission import Status, Submission
from gateway.sdk import ChatKind, ChatRef, Inbound, InboundKind, SessionKey, ToolContext, UserRef
from gateway.store.embedded import EmbeddedStore
from tools.agent.background import BackgroundTasks, TaskRecord

CHAT = ChatRef(platform="console", chat_id="c1", kind=ChatKind.DIRECT)
USER = UserRef(platform="console", user_id="ann", display_name="Ann")
SESSION = SessionKey("console", "c1")


def context() -> ToolContext:
    return ToolContext(session=SESSION, chat=CHAT, user=USER)


class Inboxes:
    """Collects what the registry hands to sessions, as admission would take it."""

    def __init__(self) -> None:
        self.got: list[Inbound] = []

    async def __call__(self, inbound: Inbound) -> Submission:
        duplicate = any(i.event_id == inbound.event_id for i in self.got)
        self.got.append(inbound)
        loop = asyncio.get_running_loop()
        return Submission(Status.DUPLICATE if duplicate else Status.QUEUED, loop.create_future())


@pytest.fixture
async def store(tmp_path: Path) -> EmbeddedStore:
    return EmbeddedStore(tmp_path / "data")


def registry(store: EmbeddedStore, inbox: Inboxes, **kw: float) -> BackgroundTasks:
    return BackgroundTasks(
        store, inbox, max_per_chat=int(kw.get("cap", 2)), admins=[], beat_seconds=kw.get("beat", 10)
    )


async def test_a_finished_task_is_recorded_and_handed_to_its_session_once(
    store: EmbeddedStore,
) -> None:
    inbox = Inboxes()
    tasks = registry(store, inbox)

    async def work(ctx: ToolContext) -> tuple[bool, str]:
        assert ctx.fence is None and ctx.task_label.startswith("background task t")
        return True, "found it"

    record = await tasks.launch(context(), "look around", work)
    await asyncio.wait_for(asyncio.gather(*tasks._running.values()), 5)
    stored = await tasks.load(record.id)
    assert stored is not None and stored.status == "done" and stored.told
    [told] = inbox.got
    assert told.kind is InboundKind.AGENT and told.session == str(SESSION)
    assert told.event_id == f"task:{record.id}:done" and told.sender == USER
    assert f"[Background task {record.id} finished: look around." in told.text
    assert told.text.endswith("found it")
    await tasks.sweep()  # told already: not again
    assert len(inbox.got) == 1
    await store.close()


async def test_the_cap_and_cancelling(store: EmbeddedStore) -> None:
    inbox = Inboxes()
    tasks = registry(store, inbox, cap=1)
    hold = asyncio.Event()

    async def work(ctx: ToolContext) -> tuple[bool, str]:
        await hold.wait()
        return True, "never"

    record = await tasks.launch(context(), "wait", work)
    with pytest.raises(ValueError, match="already has 1 background task"):
        await tasks.launch(context(), "more", work)
    assert await tasks.cancel(record) == f"Cancelled task {record.id}."
    stored = await tasks.load(record.id)
    assert stored is not None and stored.status == "cancelled" and inbox.got == []
    await tasks.close()
    await store.close()


async def test_the_sweep_marks_stale_and_closed_tasks_interrupted_and_tells_once(
    store: EmbeddedStore,
) -> None:
    inbox = Inboxes()
    # A task of a process that crashed (heartbeat long ago), and one of a live other replica.
    now = time.time()
    common = {"session": str(SESSION), "chat": CHAT, "user": USER, "label": "x", "started": now}
    crashed = TaskRecord(id="tdead01", owner="gone", beat=now - 100, **common)
    alive = TaskRecord(id="talive1", owner="other", beat=now, **common)
    first = registry(store, inbox, beat=5, cap=3)
    await first.save(crashed)
    await first.save(alive)
    # And one running here when this process stops gracefully.
    hold = asyncio.Event()

    async def work(ctx: ToolContext) -> tuple[bool, str]:
        await hold.wait()
        return True, "never"

    running = await first.launch(context(), "long", work)
    await first.close()
    closed = await first.load(running.id)
    assert closed is not None and closed.status == "interrupted" and not closed.told
    second = registry(store, inbox, beat=5)
    await second.sweep()
    statuses = {r.id: (r.status, r.told) for r in await second.records()}
    assert statuses == {
        "tdead01": ("interrupted", True),
        "talive1": ("running", False),
        running.id: ("interrupted", True),
    }
    assert sorted(i.event_id for i in inbox.got) == sorted(
        [f"task:{running.id}:interrupted", "task:tdead01:interrupted"]
    )
    assert all("was interrupted" in i.text for i in inbox.got)
    await second.sweep()
    assert len(inbox.got) == 2
    await store.close()
