"""Compaction pieces without a model: tool use in one line, the summary reply parsed, which
turns are folded, and the toolbox that tools on demand build."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from gateway.sdk.tooling import ToolContext, ToolSpec
from gateway.sessions.compaction import Compactor, parse_summary
from gateway.sessions.history import SessionRecord
from gateway.sessions.turnlog import describe_call, render_turns, tool_note, turn_text
from gateway.turn.memory import MemoryScope
from gateway.turn.toolbox import Toolbox
from tools.on_demand import OnDemand


def call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(args)}
    return {"id": call_id, "type": "function", "function": function}


TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "what changed?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("c1", "shell", command="git status")],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "M a.py\nM b.py\nM c.py\n[exit code 0]"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [call("c2", "read_file", path="a.py"), call("c3", "web_fetch", url="x")],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "print(1)"},
    {"role": "tool", "tool_call_id": "c3", "content": "error: the address is private"},
    {"role": "assistant", "content": "Three files changed."},
]


def test_tool_use_in_one_line() -> None:
    assert tool_note(TURN) == (
        "ran `git status`: M a.py (+2 lines); read_file a.py: print(1); "
        "web_fetch x: failed (the address is private)"
    )
    assert describe_call("shell", '{"command": "make"}', "boom\n[exit code 2]") == (
        "ran `make`: boom [exit 2]"
    )
    assert describe_call("lookup", "not json", "") == "lookup: no output"
    assert turn_text("hi", TURN[1:], "Three files changed.").splitlines() == [
        "User: hi",
        "Tools: " + tool_note(TURN),
        "Assistant: Three files changed.",
    ]
    rendered = render_turns(TURN)
    assert "User: what changed?" in rendered and "Assistant: Three files changed." in rendered
    assert "M b.py" not in rendered and "null" not in rendered


def test_summary_reply_parsed() -> None:
    summary = parse_summary(
        "Summary:\nWe fixed the build.\n\nFacts:\n- user: prefers tabs\n- chat: repo is acme/api\n"
        "- <a lasting fact>\n"
    )
    assert summary.text == "We fixed the build."
    assert summary.facts == [
        (MemoryScope.USER, "prefers tabs"),
        (MemoryScope.CHAT, "repo is acme/api"),
    ]
    assert parse_summary("just prose, no headings").text == "just prose, no headings"
    assert parse_summary("Summary: short\nFacts: none").facts == []


def turns(n: int, size: int = 400) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        out += [
            {"role": "user", "content": f"q{i} " + "x" * size},
            {"role": "assistant", "content": None, "tool_calls": [call(f"t{i}", "todo")]},
            {"role": "tool", "tool_call_id": f"t{i}", "content": "ok"},
            {"role": "assistant", "content": f"a{i} " + "y" * size},
        ]
    return out


async def test_fold_whole_turns_only_and_keep_the_newest() -> None:
    compactor = Compactor(None, None, 1000)
    history = turns(12)
    fold, kept = compactor._split(history)
    assert fold and kept and fold + kept == history
    assert kept[0]["role"] == "user" and kept[0]["content"].startswith("q")
    # One giant turn and a new message: everything but the new message is folded.
    giant = [*turns(1, size=20_000), {"role": "user", "content": "next"}]
    fold, kept = compactor._split(giant)
    assert kept == [{"role": "user", "content": "next"}]
    # No model: the old dropping, which also keeps whole turns.
    record = SessionRecord()
    dropped = await compactor.compact(record, history, None, None)  # type: ignore[arg-type]
    assert dropped[2]["role"] == "user" and record.summary == ""


class _Args(BaseModel):
    pass


async def _run(args: _Args, ctx: ToolContext) -> str:
    return "ok"


def spec(name: str, group: str) -> ToolSpec[Any]:
    return ToolSpec(name=name, description=name, args=_Args, handler=_run, group=group)


ALLOWED = [
    spec("read_file", "fs"),
    spec("glob", "fs"),
    spec("schedule_job", "cron"),
    spec("list_jobs", "cron"),
    spec("mcp_gh_a", "mcp:gh"),
]


def test_toolbox_offers_core_and_loads_on_request() -> None:
    offer = OnDemand(["read_file"], lambda: {"mcp:gh": "tools of the MCP server gh"})
    box = offer(ALLOWED, [])
    names = [t.name for t in box.specs()]
    assert names == ["read_file", "load_tools"]
    lines = box.specs()[-1].description
    assert "- cron: reminders and scheduled prompts (schedule_job, list_jobs)" in lines
    assert "- mcp:gh: tools of the MCP server gh (mcp_gh_a)" in lines
    assert box.load(["schedule_job", "nope", "read_file"]) == ["schedule_job"]
    assert box.get("list_jobs") is not None  # calling loads it
    assert box.loaded == ["schedule_job", "list_jobs"]
    assert "cron" not in box.specs()[-1].description
    again = offer(ALLOWED, box.loaded)  # the next turn of the session
    assert {"schedule_job", "list_jobs"} <= {t.name for t in again.specs()}
    assert Toolbox(ALLOWED).specs() == ALLOWED  # not on demand: everything, no loader


def test_the_same_waiting_tools_give_the_same_loader_every_turn() -> None:
    # One object: its schema is built once and the request's tools JSON is reused.
    groups = {"mcp:gh": "tools of the MCP server gh"}
    offer = OnDemand(["read_file"], lambda: groups)
    first, second = offer(ALLOWED, []).specs()[-1], offer(ALLOWED, []).specs()[-1]
    assert first is second
    assert offer(ALLOWED, ["schedule_job"]).specs()[-1] is not first  # less waits
    groups["mcp:gh"] = "the GitHub server"  # a server's description changed
    changed = offer(ALLOWED, []).specs()[-1]
    assert changed is not first and "the GitHub server" in changed.description


@pytest.mark.parametrize("names", [["cron"], ["group:cron"]])
async def test_load_tools_by_group(names: list[str]) -> None:
    from gateway.sdk.messages import ChatRef, UserRef
    from gateway.sessions.key import SessionKey

    box = OnDemand(["read_file"], dict)(ALLOWED, [])
    loader = box.specs()[-1]
    ctx = ToolContext(
        session=SessionKey("console", "c"),
        chat=ChatRef(platform="console", chat_id="c"),
        user=UserRef(platform="console", user_id="u"),
        toolbox=box,
    )
    result = await loader.handler(loader.args.model_validate({"names": [*names, "fs:x"]}), ctx)
    assert result.startswith("Loaded: schedule_job, list_jobs.")
    assert "Not available here: fs:x." in result
