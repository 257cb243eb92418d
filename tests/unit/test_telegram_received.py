"""Telegram webhook updates between the 200 and admission (adapters/telegram/received.py), on
the real embedded store and python-telegram-bot's real Update objects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from telegram import Bot, Update

from adapters.telegram.received import GroupWrite, RawUpdate, ReceivedUpdates
from adapters.telegram.update_check import shape_problem
from adapters.telegram.webhook import raw_update
from gateway.intake.load import IntakeLoad
from gateway.store import keys
from gateway.store.base import Batch
from gateway.store.embedded import EmbeddedStore
from tests.harness import eventually

SENDER = {"id": 7, "is_bot": False, "first_name": "Ann"}


def message_update(update_id: int, chat: int, text: str) -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 1_700_000_000,
            "chat": {"id": chat, "type": "private"},
            "from": SENDER,
            "text": text,
        },
    }


def body(data: Any) -> bytes:
    return json.dumps(data).encode()


class CountingStore(EmbeddedStore):
    """The embedded store, counting the batches it runs (each is one round trip on Redis)."""

    batches = 0

    async def run(self, batch: Batch) -> list[Any]:
        self.batches += 1
        return await super().run(batch)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CountingStore]:
    store = CountingStore(tmp_path)
    yield store
    await store.close()


class Taker:
    """Admission as the webhook path sees it: records what it took; refuses (store down)
    the updates listed in `refuse` once each."""

    def __init__(self, refuse: set[int] | None = None) -> None:
        self.taken: list[int] = []
        self.refuse = refuse or set()
        self.seen = asyncio.Event()

    async def take(self, update: Update) -> bool:
        if update.update_id in self.refuse:
            self.refuse.discard(update.update_id)
            return False
        assert update.message is not None and update.message.text is not None
        self.taken.append(update.update_id)
        self.seen.set()
        return True

    async def wait(self, count: int) -> None:
        while len(self.taken) < count:
            self.seen.clear()
            await asyncio.wait_for(self.seen.wait(), 10)


def received(store: CountingStore, taker: Taker, owner: str = "me") -> ReceivedUpdates:
    bot = Bot("123456:TEST", base_url="http://127.0.0.1:9/bot")  # never called
    return ReceivedUpdates(store, bot, taker.take, instance_id=owner, load=IntakeLoad())


# -- what the acknowledgement path accepts ----------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        b"\xff\xfe not utf-8",
        b"not json",
        b"[1, 2]",
        b'"update"',
        body({"message": {}}),  # no update_id
        body({"update_id": "5"}),
        body({"update_id": True}),
        body({"update_id": 5.0}),
        body({"update_id": 5, "message": {"chat": "42", "text": "hi"}}),  # wrong shape
        b"[" * 200 + b"]" * 200,  # nested past any update
        b'{"update_id": 5, "x": ' + b"[" * 65 + b"]" * 65 + b"}",  # nested in a field
        body({"update_id": 5, "message": {"message_id": True, "chat": {"id": 1}}}),
        body({"update_id": 5, "message": {"chat": {"id": 1}, "from": 7}}),
        body({"update_id": 5, "message": {"chat": {"id": 1}, "entities": [{"offset": "0"}]}}),
        body({"update_id": 5, "message": {"chat": {"id": 1}, "quote": {"text": 3}}}),
        body({"update_id": 5, "message": {"chat": {"id": 1}, "reply_to_message": {"chat": 1}}}),
        body({"update_id": 5, "callback_query": {"id": "q", "data": "d"}}),  # no sender
        body({"update_id": 5, "callback_query": {"id": "q", "from": {"id": "1"}}}),
    ],
)
def test_a_body_that_is_not_an_update_is_refused_before_anything_is_built(raw: bytes) -> None:
    assert raw_update(raw) is None


def test_an_update_is_kept_as_sent_with_the_chat_it_belongs_to() -> None:
    data = message_update(11, -100123, "hello")
    update = raw_update(body(data))
    assert update is not None
    assert (update.update_id, update.lane, json.loads(update.body)) == (11, "-100123", data)
    owner, decoded = RawUpdate.decode(11, update.encode("replica-a"))
    assert owner == "replica-a" and decoded == update
    # An update without a chat (an inline query) is a lane of its own.
    assert raw_update(body({"update_id": 12, "inline_query": {}})).lane == "u12"  # type: ignore[union-attr]


def test_a_shallow_update_full_of_brackets_is_accepted() -> None:
    """Brackets inside the text count toward the quick bound, not toward the nesting."""
    data = message_update(13, 42, "[" * 100 + "{" * 100)
    update = raw_update(body(data))
    assert update is not None and json.loads(update.body) == data


def test_a_refused_shape_is_named_by_its_path() -> None:
    reply = {"chat": {"id": 1}, "reply_to_message": {"chat": {"id": "1"}}}
    assert shape_problem({"message": reply}) == "message.reply_to_message.chat.id is not a int"
    query = {"id": "q", "from": {"id": 1}, "message": {"chat": []}}
    assert shape_problem({"callback_query": query}) == (
        "callback_query.message.chat is not an object"
    )


# -- writing many calls at once ------------------------------------------------------------


async def test_a_crowd_of_writes_goes_to_the_store_in_a_few_batches(store: CountingStore) -> None:
    writes = GroupWrite(store, keys.TELEGRAM_RECEIVED)
    await asyncio.gather(*(writes.hset(str(n), f"value {n}") for n in range(200)))
    stored = await store.hgetall(keys.TELEGRAM_RECEIVED)
    assert stored == {str(n): f"value {n}" for n in range(200)}
    assert store.batches <= 2  # the first call's flush takes all that arrived with it


async def test_a_failed_write_fails_every_call_in_its_batch(store: CountingStore) -> None:
    writes = GroupWrite(store, keys.TELEGRAM_RECEIVED)
    await store.close()  # a store that cannot write
    results = await asyncio.gather(
        *(writes.hset(str(n), "v") for n in range(5)), return_exceptions=True
    )
    assert all(isinstance(r, Exception) for r in results)


# -- after the answer ---------------------------------------------------------------------


async def test_updates_are_taken_in_order_per_chat_and_then_removed(store: CountingStore) -> None:
    taker = Taker()
    inbox = received(store, taker)
    inbox.start()
    try:
        updates = [
            raw_update(body(message_update(n, chat=n % 3, text=f"m{n}"))) for n in range(1, 31)
        ]
        for update in updates:
            assert update is not None
            assert await inbox.write(update)
            inbox.hand_over(update)
        await taker.wait(30)
        for chat in range(3):
            ids = [n for n in taker.taken if n % 3 == chat]
            assert ids == sorted(ids)
        await eventually(lambda: inbox.backlog == 0, what="the taken updates forgotten")
        assert await store.hgetall(keys.TELEGRAM_RECEIVED) == {}
    finally:
        await inbox.stop()


async def test_a_call_sent_again_while_its_update_waits_is_not_written_twice(
    store: CountingStore,
) -> None:
    taker = Taker()
    inbox = received(store, taker)  # not started: the update waits
    update = raw_update(body(message_update(5, 42, "once")))
    assert update is not None
    assert await inbox.write(update)
    inbox.hand_over(update)
    batches = store.batches
    assert not await inbox.write(update)  # Telegram's retry: answered, nothing written
    inbox.hand_over(update)
    assert store.batches == batches and inbox.backlog == 1
    inbox.start()
    try:
        await taker.wait(1)
        await asyncio.sleep(0.05)
        assert taker.taken == [5]
    finally:
        await inbox.stop()


async def test_an_update_the_store_could_not_take_stays_stored_and_is_taken_again(
    store: CountingStore,
) -> None:
    taker = Taker(refuse={2})
    inbox = received(store, taker)
    inbox.start()
    try:
        for n in (1, 2, 3):
            update = raw_update(body(message_update(n, 42, f"m{n}")))
            assert update is not None
            await inbox.write(update)
            inbox.hand_over(update)
        await taker.wait(1)
        # 2 was refused: it and 3 after it (same chat) wait, still stored.
        assert taker.taken == [1]
        assert set(await store.hgetall(keys.TELEGRAM_RECEIVED)) == {"2", "3"}
        await taker.wait(3)
        assert taker.taken == [1, 2, 3]
    finally:
        await inbox.stop()


async def test_updates_another_run_left_are_taken_oldest_first(store: CountingStore) -> None:
    """A process that answered 200 and died before reading: the next start reads them."""
    dead = received(store, Taker(), owner="dead-run")
    newer = raw_update(body(message_update(9, 42, "second")))
    older = raw_update(body(message_update(8, 42, "first")))
    assert newer is not None and older is not None
    older = RawUpdate(older.update_id, older.lane, older.body, newer.at - 1)
    await dead.write(newer)
    await dead.write(older)
    taker = Taker()
    inbox = received(store, taker, owner="next-run")
    mine = raw_update(body(message_update(10, 43, "mine, being answered")))
    assert mine is not None
    await inbox.write(mine)  # written, not yet handed over: not an orphan
    assert await inbox.adopt_orphans() == 2
    inbox.start()
    try:
        await taker.wait(2)
        assert taker.taken[:2] == [8, 9]
        assert set(await store.hgetall(keys.TELEGRAM_RECEIVED)) == {"10"}
        assert await inbox.adopt_orphans() == 0
    finally:
        await inbox.stop()


async def test_an_entry_that_is_not_an_update_is_dropped_not_retried(
    store: CountingStore,
) -> None:
    await store.hset(keys.TELEGRAM_RECEIVED, "x", "garbage")
    await store.hset(keys.TELEGRAM_RECEIVED, "3", "dead-run\n1.0\nnot json")
    inbox = received(store, Taker(), owner="next-run")
    assert await inbox.adopt_orphans() == 0
    assert await store.hgetall(keys.TELEGRAM_RECEIVED) == {}
