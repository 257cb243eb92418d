"""todo: the model writes the whole list, reads it back; one list per session, kept in the store."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from gateway.sdk.messages import ChatRef, UserRef
from gateway.sdk.tooling import ToolContext
from gateway.sessions.key import SessionKey
from gateway.store.base import Store
from tools.agent.todo import TodoTools


def ctx(chat_id: str) -> ToolContext:
    return ToolContext(
        session=SessionKey("console", chat_id),
        chat=ChatRef(platform="console", chat_id=chat_id),
        user=UserRef(platform="console", user_id="u"),
    )


async def call(store: Store, chat_id: str = "a", **args: Any) -> str:
    (spec,) = TodoTools(store).specs()
    return await spec.handler(spec.args.model_validate(args), ctx(chat_id))


async def test_write_then_read(embedded_store: Store) -> None:
    assert await call(embedded_store) == "The task list is empty."
    items = [
        {"task": "read the logs", "status": "done"},
        {"task": "find the bug", "status": "in_progress"},
        {"task": "write the fix"},
    ]
    expected = "Tasks (1/3 done):\n[x] read the logs\n[>] find the bug\n[ ] write the fix"
    assert await call(embedded_store, items=items) == expected
    assert await call(embedded_store) == expected
    assert await call(embedded_store, chat_id="b") == "The task list is empty."


async def test_replace_and_clear(embedded_store: Store) -> None:
    await call(embedded_store, items=[{"task": "a"}, {"task": "b"}])
    out = await call(embedded_store, items=[{"task": "a", "status": "done"}])
    assert out == "Tasks (1/1 done):\n[x] a"
    assert await call(embedded_store, items=[]) == "The task list is cleared."
    assert await call(embedded_store) == "The task list is empty."


async def test_several_in_progress_get_a_note(embedded_store: Store) -> None:
    out = await call(
        embedded_store,
        items=[{"task": "a", "status": "in_progress"}, {"task": "b", "status": "in_progress"}],
    )
    assert out.endswith("keep one in progress at a time.")


@pytest.mark.parametrize(
    "items",
    [[{"task": "x", "status": "started"}], [{"task": ""}], [{"task": "x"}] * 51],
)
def test_bad_lists_are_rejected_by_the_schema(items: list[dict[str, str]]) -> None:
    (spec,) = TodoTools(None).specs()  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        spec.args.model_validate({"items": items})
