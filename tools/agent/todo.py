"""The todo tool: a per-session task list the model keeps while it works through a multi-step job.

The model always writes the whole list (simpler for it than item edits, and a write can
never leave the list half-changed); the list lives in the store, so it survives restarts
and is the same on every replica.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gateway.sdk import SessionKey, Store, ToolContext, ToolFamily, ToolSpec, keys
from tools.args import ToolArgs

GROUP = "session"
TTL_SECONDS = 30 * 24 * 3600
MAX_ITEMS = 50
_MARK = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]"}

Status = Literal["pending", "in_progress", "done"]


class TodoItem(ToolArgs):
    task: str = Field(min_length=1, max_length=300)
    status: Status = "pending"


class TodoArgs(ToolArgs):
    items: list[TodoItem] | None = Field(
        default=None,
        max_length=MAX_ITEMS,
        description="The whole new list, replacing the old one; [] clears it. Omit to read.",
    )


def todo_key(session: SessionKey) -> str:
    return keys.todo(session)


async def load_todos(store: Store, session: SessionKey) -> list[TodoItem]:
    raw = await store.get_json(todo_key(session))
    return [TodoItem.model_validate(item) for item in raw or []]


def render(items: list[TodoItem]) -> str:
    if not items:
        return "The task list is empty."
    done = sum(item.status == "done" for item in items)
    lines = [f"Tasks ({done}/{len(items)} done):"]
    lines += [f"{_MARK[item.status]} {item.task}" for item in items]
    if sum(item.status == "in_progress" for item in items) > 1:
        lines.append("Note: several tasks are in progress; keep one in progress at a time.")
    return "\n".join(lines)


class TodoTools(ToolFamily):
    """The todo tool; each session's list lives in `store`."""

    name = "todo"

    def __init__(self, store: Store) -> None:
        self.store = store

    async def todo(self, args: TodoArgs, ctx: ToolContext) -> str:
        if args.items is None:
            return render(await load_todos(self.store, ctx.session))
        key = todo_key(ctx.session)
        if not args.items:
            await self.store.delete(key)
            return "The task list is cleared."
        await self.store.set_json(key, [item.model_dump() for item in args.items], ttl=TTL_SECONDS)
        return render(args.items)

    def specs(self) -> list[ToolSpec[Any]]:
        return [
            ToolSpec(
                name="todo",
                description=(
                    "Your task list for multi-step work in this conversation. Write the whole list "
                    "with each task's status (pending, in_progress, done) as you go; omit items to "
                    "read it."
                ),
                args=TodoArgs,
                handler=self.todo,
                group=GROUP,
            )
        ]
