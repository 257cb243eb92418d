"""Which later messages join a running turn (gateway/turn/steering.py): the merge window, steering
at step boundaries, and the commit that drops what joined, on the embedded store."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.runtime.metrics import Metrics
from gateway.sdk.messages import (
    Attachment,
    AttachmentKind,
    ChatKind,
    ChatRef,
    Inbound,
    InboundKind,
    UserRef,
)
from gateway.sessions.leases import SessionLeases
from gateway.store.base import Batch
from gateway.store.embedded import EmbeddedStore
from gateway.store.inbox import InboxEntry, IntakeRequest
from gateway.turn.states import TurnRun
from gateway.turn.steering import (
    STEERED_NOTE,
    Steering,
    Waiting,
    as_message,
    decode_waiting,
    merged,
    steered,
)

CHAT = ChatRef(platform="telegram", chat_id="42")
ANA = UserRef(platform="telegram", user_id="1", display_name="Ana")
BEN = UserRef(platform="telegram", user_id="2", display_name="Ben")
SESSION = "telegram:42"


def inbound(text: str, at: float, sender: UserRef = ANA, **extra: Any) -> Inbound:
    extra.setdefault("chat", CHAT)
    return Inbound(event_id=f"e-{text}", sender=sender, text=text, received_at=at, **extra)


def waiting(*items: Inbound) -> list[Waiting]:
    return [Waiting(f"id-{item.text}", item) for item in items]


def texts(items: list[Waiting]) -> list[str]:
    return [w.inbound.text for w in items]


def test_merge_takes_the_same_persons_messages_each_within_the_window() -> None:
    head = inbound("hi", 100.0)
    later = waiting(
        inbound("I need help", 101.0),
        inbound("with my invoice", 102.4),
        inbound("much later", 104.5),  # 2.1 s after the one before
    )
    assert texts(merged(head, later, 1.5)) == ["I need help", "with my invoice"]
    assert merged(head, later, 0) == []


def test_merge_stops_at_another_person_or_a_message_with_files() -> None:
    head = inbound("hi", 100.0)
    assert texts(merged(head, waiting(inbound("yo", 100.5, BEN), inbound("x", 100.6)), 1.5)) == []
    photo = Attachment(kind=AttachmentKind.IMAGE, file_id="f1")
    files = waiting(inbound("a", 100.2), inbound("pic", 100.4, attachments=(photo,)))
    assert texts(merged(head, [*files, *waiting(inbound("b", 100.6))], 1.5)) == ["a"]


def test_steering_takes_what_came_since_in_order_up_to_a_scheduled_prompt() -> None:
    items = waiting(
        inbound("one", 1.0),
        inbound("two", 2.0, BEN),
        inbound("job", 3.0, kind=InboundKind.AGENT),
        inbound("three", 4.0),
    )
    assert texts(steered(items, (), 20)) == ["one", "two"]
    assert texts(steered(items, ("id-one",), 20)) == ["two"]
    assert texts(steered(items, (), 1)) == ["one"]


def test_a_joined_message_names_another_sender_and_a_steered_one_says_when_it_came() -> None:
    head = inbound("hi", 1.0)
    assert as_message(head, inbound("more", 2.0), steered=False) == {
        "role": "user",
        "content": "more",
    }
    content = as_message(head, inbound("stop", 2.0, BEN), steered=True)["content"]
    assert content == f"{STEERED_NOTE}\nBen: stop"


def test_a_steered_message_in_a_group_names_its_sender_once() -> None:
    group = ChatRef(platform="telegram", chat_id="-100", kind=ChatKind.GROUP)
    head = inbound("build it", 1.0, chat=group)
    content = as_message(head, inbound("stop", 2.0, BEN, chat=group), steered=True)["content"]
    assert content == f"{STEERED_NOTE}\nBen: stop"


def test_decode_skips_the_turns_own_message_and_anything_unreadable() -> None:
    own = InboxEntry("own", inbound("own", 1.0).model_dump_json())
    broken = InboxEntry("broken", "{not json")
    later = InboxEntry("later", inbound("later", 2.0).model_dump_json())
    assert [w.entry_id for w in decode_waiting([own, broken, later], "own")] == ["later"]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[EmbeddedStore]:
    opened = EmbeddedStore(tmp_path / "data")
    yield opened
    await opened.close()


async def stored(store: EmbeddedStore, item: Inbound, owner: str | None = None) -> TurnRun | None:
    result = await store.intake(
        IntakeRequest(
            session=SESSION,
            entry=InboxEntry(f"id-{item.text}", item.model_dump_json()),
            seen=None,
            seen_ttl=60,
            max_queued=50,
            max_total=100,
            lease_owner=owner,
        )
    )
    if result.claimed is None:
        return None
    return SessionLeases(store, "a", 5.0, Metrics()).turn(result.claimed)


async def test_a_steered_turn_takes_follow_ups_once_and_its_commit_drops_them(
    store: EmbeddedStore,
) -> None:
    now = time.time()
    lease = await stored(store, inbound("build it", now), owner="a:1")
    assert lease is not None
    acknowledged: list[str] = []

    async def acknowledge(item: Inbound) -> None:
        acknowledged.append(item.text)

    steering = Steering(
        lease, lease_head(lease), steer=True, merge_window=0, acknowledge=acknowledge
    )
    await steering.gather()
    assert (await steering.take()).messages == []
    await stored(store, inbound("and test it", now + 1))
    [message] = (await steering.take()).messages
    assert message["content"] == f"{STEERED_NOTE}\nand test it"
    assert (await steering.take()).messages == []  # taken once
    assert acknowledged == ["and test it"]
    assert lease.absorbed == ["id-and test it"]
    lease.start()
    await lease.commit(Batch(), None)
    assert await store.pending(SESSION) == []


async def test_a_rerun_takes_in_at_its_start_what_the_dead_run_took_in(
    store: EmbeddedStore,
) -> None:
    """Both messages are still stored (nothing committed): the next run's first step has them."""
    now = time.time() - 10
    lease = await stored(store, inbound("build it", now), owner="a:1")
    assert lease is not None
    await stored(store, inbound("and test it", now + 1))
    steering = Steering(lease, lease_head(lease), steer=True, merge_window=0)
    await steering.gather()
    assert [m["content"] for m in (await steering.take()).messages] == ["and test it"]
    assert lease.absorbed == ["id-and test it"]


async def test_the_merge_window_waits_for_follow_ups_and_gathers_them(
    store: EmbeddedStore,
) -> None:
    now = time.time()
    lease = await stored(store, inbound("hi", now), owner="a:1")
    assert lease is not None
    await stored(store, inbound("I need help", now + 0.1))
    gathered: list[bool] = []
    steering = Steering(
        lease,
        lease_head(lease),
        steer=False,
        merge_window=0.3,
        on_gathered=lambda: gathered.append(True),
    )
    await steering.gather()
    assert time.time() >= now + 0.4  # waited out the window after the last one
    assert gathered == [True]
    assert [m["content"] for m in (await steering.take()).messages] == ["I need help"]
    await stored(store, inbound("later", time.time()))
    assert (await steering.take()).messages == []  # not steering: a turn of its own


def lease_head(lease: TurnRun) -> Inbound:
    return Inbound.model_validate_json(lease.claimed.entry.payload)
