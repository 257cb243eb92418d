"""Standing grants (gateway/approvals/grants.py): one person, one tool, one exact shape,
sealed in place; ended grants stay ended when written back (the place's sealed epoch)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from gateway.approvals.grants import EPOCH_KIND, KIND, SESSION_TTL, GrantBook, grant_field
from gateway.approvals.seals import EntrySigner
from gateway.runtime.metrics import Metrics
from gateway.store import keys
from gateway.store.embedded import EmbeddedStore

SIGNER = EntrySigner(b"grants test key!" * 2)
SESSION, CHAT = "telegram:-100:uana", "telegram:-100"
SHAPE = "rm -f -r /ws/build"


@pytest_asyncio.fixture
async def book(tmp_path: Path) -> AsyncIterator[tuple[GrantBook, EmbeddedStore]]:
    store = EmbeddedStore(tmp_path / "store")
    try:
        yield GrantBook(store, SIGNER), store
    finally:
        await store.close()


async def add(book: GrantBook, scope: str, place: str, owner: str = "telegram:ana") -> None:
    await book.add(
        scope,  # type: ignore[arg-type]
        place,
        owner=owner,
        owner_label="Ana",
        tool="shell",
        shape=SHAPE,
        command="rm -rf build",
        by="telegram:admin",
        by_label="Admin",
    )


async def test_a_grant_covers_its_owner_tool_and_exact_shape_only(
    book: tuple[GrantBook, EmbeddedStore],
) -> None:
    grants, _ = book
    await add(grants, "session", SESSION)
    assert await grants.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is not None
    assert await grants.find(SESSION, CHAT, "telegram:bob", "shell", SHAPE) is None
    assert await grants.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE + "/x") is None
    assert await grants.find(SESSION, CHAT, "telegram:ana", "execute_code", SHAPE) is None
    assert await grants.find("telegram:-100:ubob", CHAT, "telegram:ana", "shell", SHAPE) is None
    await add(grants, "chat", CHAT, owner="telegram:bob")
    found = await grants.find("telegram:-100:ubob", CHAT, "telegram:bob", "shell", SHAPE)
    assert found is not None and found.scope == "chat"
    assert [g.scope for g in await grants.listing(SESSION, CHAT)] == ["session", "chat"]


async def test_copied_forged_or_stale_grants_do_not_count(
    book: tuple[GrantBook, EmbeddedStore],
) -> None:
    grants, store = book
    await add(grants, "chat", CHAT)
    field = grant_field("telegram:ana", "shell", SHAPE)
    sealed = await store.hget(keys.standing_grants(CHAT), field)
    assert sealed is not None
    # Copied into another chat, or under another person's field: the seal names its place.
    await store.hset(keys.standing_grants("telegram:-200"), field, sealed)
    assert (
        await grants.find("telegram:-200", "telegram:-200", "telegram:ana", "shell", SHAPE) is None
    )
    bob = grant_field("telegram:bob", "shell", SHAPE)
    await store.hset(keys.standing_grants(CHAT), bob, sealed)
    assert await grants.find(SESSION, CHAT, "telegram:bob", "shell", SHAPE) is None
    # Written without the key.
    value = json.loads(sealed)["v"] | {"shape": "rm -f -r /"}
    await store.hset(keys.standing_grants(CHAT), field, json.dumps({"v": value, "mac": "0" * 64}))
    assert await grants.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None
    assert await grants.listing(SESSION, CHAT) == []
    # A session grant replayed after its time is void even though it verifies.
    old = json.loads(sealed)["v"] | {"scope": "session", "place": SESSION}
    old["at"] = time.time() - SESSION_TTL - 60
    name = keys.approved_shapes(SESSION)
    await store.hset(name, field, SIGNER.seal(KIND, f"{name}\0{field}", old))
    assert await grants.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None


async def test_ended_grants_written_back_stay_ended(
    book: tuple[GrantBook, EmbeddedStore],
) -> None:
    """Issue 30 finding 7: a seal names the place, not the lifetime; the place's epoch does."""
    grants, store = book
    later = GrantBook(store, SIGNER)  # a process started after the grants ended
    await add(grants, "session", SESSION)
    name = keys.approved_shapes(SESSION)
    copied = await store.hgetall(name)
    await grants.end_session(SESSION)  # /new
    assert await store.hgetall(name) == {}
    for field, raw in copied.items():
        await store.hset(name, field, raw)
    for reader in (grants, later):
        assert await reader.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None
        assert await reader.listing(SESSION, CHAT) == []
    # A new grant there counts again.
    await add(grants, "session", SESSION)
    assert await later.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is not None


async def test_a_revoked_grant_written_back_stays_revoked_and_the_others_stand(
    book: tuple[GrantBook, EmbeddedStore],
) -> None:
    grants, store = book
    await add(grants, "chat", CHAT)
    await add(grants, "chat", CHAT, owner="telegram:bob")
    name = keys.standing_grants(CHAT)
    field = grant_field("telegram:ana", "shell", SHAPE)
    copied = await store.hget(name, field)
    assert copied is not None
    [ana] = [g for g in await grants.listing(SESSION, CHAT) if g.owner == "telegram:ana"]
    assert await grants.revoke(ana)
    await store.hset(name, field, copied)
    for reader in (grants, GrantBook(store, SIGNER)):
        assert await reader.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None
        assert await reader.find(SESSION, CHAT, "telegram:bob", "shell", SHAPE) is not None
        assert [g.owner for g in await reader.listing(SESSION, CHAT)] == ["telegram:bob"]


async def test_without_a_valid_epoch_record_no_grant_counts(
    book: tuple[GrantBook, EmbeddedStore],
) -> None:
    grants, store = book
    metrics = Metrics()
    signer = EntrySigner(b"grants test key!" * 2, metrics)
    await add(grants, "chat", CHAT)
    epoch = keys.grant_epoch(keys.standing_grants(CHAT))
    await store.delete(epoch)  # removed: a process that never saw it trusts nothing there
    assert (
        await GrantBook(store, signer).find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None
    )
    for forged in ("1", json.dumps({"v": 1, "mac": "0" * 64}), "not json"):
        await store.set(epoch, forged)
        fresh = GrantBook(store, signer)
        assert await fresh.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None
    assert metrics.counter("approvals_tampered_total", kind=EPOCH_KIND) == 1  # once per entry
    # A grant made before epochs existed (no epoch in it) no longer counts either.
    await add(grants, "session", SESSION, owner="telegram:cy")
    name = keys.approved_shapes(SESSION)
    field = grant_field("telegram:cy", "shell", SHAPE)
    raw = await store.hget(name, field)
    assert raw is not None and await grants.find(SESSION, CHAT, "telegram:cy", "shell", SHAPE)
    legacy = {k: v for k, v in json.loads(raw)["v"].items() if k != "epoch"}
    await store.hset(name, field, SIGNER.seal(KIND, f"{name}\0{field}", legacy))
    assert await grants.find(SESSION, CHAT, "telegram:cy", "shell", SHAPE) is None


async def test_an_earlier_epoch_record_put_back_is_noticed(
    book: tuple[GrantBook, EmbeddedStore],
) -> None:
    """The whole place copied out and put back after /new: both entries verify, but the
    process that moved the epoch on remembers it."""
    _, store = book
    metrics = Metrics()
    grants = GrantBook(store, EntrySigner(b"grants test key!" * 2, metrics))
    await add(grants, "session", SESSION)
    name = keys.approved_shapes(SESSION)
    epoch = keys.grant_epoch(name)
    copied, copied_epoch = await store.hgetall(name), await store.get(epoch)
    assert copied_epoch is not None
    await grants.end_session(SESSION)
    ended_epoch = await store.get(epoch)
    await store.set(epoch, copied_epoch)
    for field, raw in copied.items():
        await store.hset(name, field, raw)
    assert await grants.find(SESSION, CHAT, "telegram:ana", "shell", SHAPE) is None
    assert metrics.counter("approvals_tampered_total", kind=EPOCH_KIND) == 1
    assert await store.get(epoch) == ended_epoch  # put right for every other process
