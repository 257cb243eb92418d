"""The notes a new session's system prompt starts from: both scopes read in one batch."""

from __future__ import annotations

import pytest

from gateway.config import MemorySettings
from gateway.sdk.messages import ChatKind, ChatRef, UserRef
from gateway.store.base import Store
from gateway.turn.memory import MemoryBook, MemoryScope

CHAT = ChatRef(platform="telegram", chat_id="-100", kind=ChatKind.GROUP)
ANA = UserRef(platform="telegram", user_id="7", display_name="Ana")


@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis), "embedded"])
def store(request: pytest.FixtureRequest) -> Store:
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture


async def test_notes_hold_both_scopes_and_nothing_is_empty(store: Store) -> None:
    book = MemoryBook(store, MemorySettings())
    empty = await book.notes(CHAT, ANA)
    assert (empty.chat, empty.user) == ([], [])
    await book.add(MemoryScope.CHAT, CHAT, ANA, "the team deploys on Fridays")
    await book.add(MemoryScope.USER, CHAT, ANA, "Ana prefers short answers")
    await book.add(MemoryScope.USER, CHAT, ANA, "Ana  works in  Lisbon")
    notes = await book.notes(CHAT, ANA)
    assert notes.chat == ["the team deploys on Fridays"]
    assert notes.user == ["Ana prefers short answers", "Ana works in Lisbon"]
    other = await book.notes(CHAT, UserRef(platform="telegram", user_id="8", display_name="Bo"))
    assert (other.chat, other.user) == (["the team deploys on Fridays"], [])
