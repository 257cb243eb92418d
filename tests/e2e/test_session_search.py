"""session_search through the real gateway on both stores: past turns (also ones ended with
/new) are found with dates and a summary, /forget removes them, chats stay apart unless an
admin searches everything, and retention prunes old ones."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.sessions.retention import RetentionSweeper
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.harness import Harness, gateway_settings, running_gateway
from tools.memory.search import SUMMARY_PROMPT


@pytest.fixture(params=["embedded", pytest.param("redis", marks=pytest.mark.redis)])
async def gw(
    tmp_path: Path, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else ""
    settings = gateway_settings(
        tmp_path, llm.url, redis_url=redis_url, access={"admins": ["console:boss"]}
    )
    async with running_gateway(settings) as harness:
        yield harness


def search(query: str, **more: Any) -> Reply:
    return Reply.calls(("session_search", {"query": query, **more}))


async def found(gw: Harness, llm: ScriptedLLM, query: str, **where: Any) -> str:
    """Ask in a chat (default chat1) and return what session_search gave the model."""
    chat_id = where.pop("chat_id", None)
    user_id = where.pop("user_id", None)
    llm.push(search(query, **where), Reply.text("searched"))
    place = {k: v for k, v in (("chat_id", chat_id), ("user_id", user_id)) if v}
    await gw.say("what did we say before?", **place)
    return tool_results(llm.requests[-1])[0]


async def test_new_keeps_turns_searchable_and_forget_removes_them(
    gw: Harness, llm: ScriptedLLM
) -> None:
    llm.push(Reply.call("todo", action="list"), Reply.text("The Grafana dashboard is at /d/ops."))
    await gw.say("where is the grafana dashboard for ops?")
    assert (await gw.say("/new")).reply is not None
    result = await found(gw, llm, "grafana dashboard")
    assert result.startswith("1 past turn(s) match 'grafana dashboard'")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert f"1. {today}" in result and "Grafana dashboard is at /d/ops" in result
    assert "Tools: todo" in result  # the turn's tool use, in one line
    assert "Nothing" in await found(gw, llm, "kubernetes")

    await gw.say("/forget")
    assert "Nothing in this chat's past conversations" in await found(gw, llm, "grafana")


async def test_chats_stay_apart_and_admins_search_everywhere(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("noted: the boiler code is 7731"))
    await gw.say("the boiler code is 7731", chat_id="other")
    assert "Nothing" in await found(gw, llm, "boiler code")
    refused = await found(gw, llm, "boiler code", scope="all")
    assert refused == "error: only an admin may search every chat; search this chat (scope chat)."
    everywhere = await found(gw, llm, "boiler", scope="all", user_id="boss")
    assert "in console:other:" in everywhere and "7731" in everywhere


async def test_a_summary_of_the_hits(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("We chose Postgres 16 for the billing service."))
    await gw.say("which database for billing?")

    def summarise(request: dict[str, Any]) -> Reply:
        if request["messages"][0]["content"] == SUMMARY_PROMPT:
            assert "Postgres 16" in last_user_text(request)
            return Reply.text("Postgres 16 was chosen for billing.")
        return Reply.text("searched")

    llm.responder = summarise
    llm.push(search("billing postgres", summarize=True))  # then the summary, then "searched"
    await gw.say("what did we pick?")
    result = tool_results(llm.requests[-1])[0]
    assert result.startswith("Summary: Postgres 16 was chosen for billing.")
    assert "1 past turn(s) match" in result


async def test_retention_prunes_old_turns_and_idle_conversations(
    gw: Harness, llm: ScriptedLLM
) -> None:
    llm.push(Reply.text("The VPN config lives in /etc/wg."))
    await gw.say("where is the vpn config?")
    key = gw.app.session_key(gw.console.inbound("x"))
    assert (await gw.app.sessions.load(key)).turns == 1
    sweeper = RetentionSweeper(gw.app.store, gw.app.sessions, retention_days=90, instance_id="test")
    soon = time.time() + 89 * 86_400
    assert (await sweeper.sweep_once(soon)) is not None
    assert (await gw.app.sessions.load(key)).turns == 1  # not old enough yet
    later = time.time() + 91 * 86_400
    pruned = await sweeper.sweep_once(later)
    assert pruned is not None and pruned.docs == 1 and pruned.sessions == [str(key)]
    assert await sweeper.sweep_once(later) is None  # this period was swept already
    assert (await gw.app.sessions.load(key)).is_new
    assert "Nothing" in await found(gw, llm, "vpn config")


async def test_a_persons_own_session_sees_only_their_turns(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url, sessions={"isolation": "user"})
    async with running_gateway(settings) as gw:
        llm.push(Reply.text("Your locker number is 118."))
        await gw.say("what is my locker number?")
        assert "Nothing" in await found(gw, llm, "locker", user_id="bob")
        assert "locker number is 118" in await found(gw, llm, "locker")
