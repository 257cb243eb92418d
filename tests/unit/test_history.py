"""History compaction keeps tool-call groups whole and stays under budget; saved sessions
keep the console's list of chats."""

from types import SimpleNamespace
from typing import Any

import pytest

from gateway.sessions import history
from gateway.sessions.history import (
    TRIMMED_NOTE,
    SessionRecord,
    SessionStore,
    compact,
    estimate_tokens,
)
from gateway.sessions.key import SessionKey
from gateway.store.base import Store


def _turn(i: int, size: int = 400) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {i} " + "q" * size},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{i}", "content": "r" * size},
        {"role": "assistant", "content": f"answer {i}"},
    ]


def test_under_budget_unchanged() -> None:
    history = _turn(1)
    assert compact(history, 10_000) is history


def test_drops_oldest_whole_turns() -> None:
    history = [m for i in range(30) for m in _turn(i)]
    out = compact(history, 2000)
    assert estimate_tokens(out) <= 2000
    assert out[0] == {"role": "user", "content": TRIMMED_NOTE}
    kept = out[2:]
    assert kept[0]["role"] == "user"
    ids = {m["tool_call_id"] for m in kept if m["role"] == "tool"}
    calls = {c["id"] for m in kept if m.get("tool_calls") for c in m["tool_calls"]}
    assert ids == calls
    assert kept[-1]["content"] == "answer 29"


def test_newest_turn_kept_even_if_too_big() -> None:
    history = _turn(1, size=50_000)
    assert compact(history, 1000) == history


def test_compacting_twice_keeps_one_note() -> None:
    history = [m for i in range(30) for m in _turn(i)]
    once = compact(history, 3000)
    twice = compact([*once, *_turn(99)], 3000)
    assert sum(1 for m in twice if m.get("content") == TRIMMED_NOTE) == 1


async def test_a_session_older_than_the_chat_list_joins_it_on_its_next_turn(
    embedded_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    # The history module's clock only: the store keeps its own.
    monkeypatch.setattr(history, "time", SimpleNamespace(time=lambda: clock[0]))
    sessions = SessionStore(embedded_store)
    first = SessionKey(platform="telegram", chat_id="7")
    await sessions.save(first, SessionRecord(turns=1))
    assert await sessions.chats() == {"telegram:7": 1000.0}
    # A session saved before the list existed: its record is there, the list has no entry.
    old = SessionKey(platform="slack", chat_id="C1")
    await embedded_store.set(sessions.store_key(old), sessions.encode(SessionRecord(turns=40)))
    assert "slack:C1" not in await sessions.chats()
    clock[0] = 2000.0
    await sessions.save(old, SessionRecord(turns=41))
    clock[0] = 3000.0
    await sessions.save(first, SessionRecord(turns=2))
    assert await sessions.chats() == {"telegram:7": 3000.0, "slack:C1": 2000.0}  # last active
    assert await sessions.sessions_of("telegram:7") == {str(first): 1000.0}  # when it began
