"""Standing grants (gateway/approvals/grants.py): one person, one tool, one exact shape,
sealed in place."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from gateway.approvals.grants import KIND, SESSION_TTL, GrantBook, grant_field
from gateway.approvals.seals import EntrySigner
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
