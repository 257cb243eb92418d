"""Malformed text through the real gateway on both stores: a lone surrogate (from a platform,
the model or a tool) never fails a turn or loses history, and /remind with an absurd
duration gets one clear reply."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from gateway.intake.admission import Status
from gateway.sdk.tooling import ToolContext, ToolSpec
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import Harness, gateway_settings, running_gateway

LONE = "\ud800"  # half of a surrogate pair: Python holds it, UTF-8 cannot encode it


@pytest.fixture(params=["embedded", "redis"])
async def gw(
    tmp_path: Path, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else ""
    async with running_gateway(gateway_settings(tmp_path, llm.url, redis_url=redis_url)) as h:
        yield h


async def history(gw: Harness) -> list[object]:
    key = gw.app.session_key(gw.console.inbound("x"))
    return [m.get("content") for m in (await gw.app.sessions.load(key)).messages]


async def test_lone_surrogate_from_the_person(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("first answer"))
    assert (await gw.say("hello")).ok
    outcome = await gw.say(f"broken {LONE} emoji")
    assert outcome.ok and outcome.reply == "echo: broken \ufffd emoji"
    assert (await gw.say("and after")).ok
    # The whole conversation is kept and sent to the model, the bad half replaced.
    assert await history(gw) == [
        "hello",
        "first answer",
        "broken \ufffd emoji",
        "echo: broken \ufffd emoji",
        "and after",
        "echo: and after",
    ]
    assert llm.requests[-1]["messages"][-1] == {"role": "user", "content": "and after"}


async def test_lone_surrogate_in_a_name_and_a_split_pair(gw: Harness, llm: ScriptedLLM) -> None:
    pair = "\ud83d\ude00"  # a pair held as two halves: joined back into 😀
    outcome = await gw.say(f"smile {pair}", user_id=f"bob{LONE}")
    assert outcome.ok and outcome.reply == "echo: smile 😀"


async def test_lone_surrogate_from_the_model(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text(f"model {LONE} reply"))
    outcome = await gw.say("hi")
    assert outcome.ok and gw.texts == ["model \ufffd reply"]
    assert (await gw.say("next")).ok
    assert await history(gw) == ["hi", "model \ufffd reply", "next", "echo: next"]


class _NoArgs(BaseModel):
    pass


async def test_lone_surrogate_from_a_tool(gw: Harness, llm: ScriptedLLM) -> None:
    async def garbled(args: _NoArgs, ctx: ToolContext) -> str:
        return f"bytes read with surrogateescape: \udcff{LONE}"

    gw.app.tools.register(ToolSpec("garbled", "returns broken text", _NoArgs, garbled, "test"))
    llm.push(Reply.call("garbled"), Reply.text("done"))
    outcome = await gw.say("read it")
    assert outcome.ok and outcome.reply == "done"
    assert (await gw.say("again")).ok
    [result] = tool_results(llm.requests[1])
    assert "\ufffd\ufffd" in result
    stored = await history(gw)
    assert stored[0] == "read it" and stored[-2:] == ["again", "echo: again"]
    assert any(isinstance(c, str) and "surrogateescape: \ufffd\ufffd" in c for c in stored)


@pytest.mark.parametrize(
    "when",
    ["99999999999999999999d", "99999999999w", "every 99999999999999999999h", "9" * 400 + "s"],
)
async def test_remind_with_an_absurd_duration_says_so(gw: Harness, when: str) -> None:
    submission = await gw.submit(f"/remind {when} stretch")
    assert submission.status is Status.COMMAND
    outcome = await submission.done
    assert outcome.ok and outcome.reply is not None
    assert outcome.reply.startswith("'") and "is too long; at most 100 years" in outcome.reply
    assert "No scheduled jobs" in (await gw.say("/jobs")).reply  # type: ignore[operator]


async def test_remind_at_the_edge_of_the_calendar_says_so(gw: Harness) -> None:
    outcome = await gw.say("/remind 9999-12-31T23:59-12:00 party")
    assert outcome.reply is not None and "is outside the calendar" in outcome.reply
