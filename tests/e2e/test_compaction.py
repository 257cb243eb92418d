"""Summarising compaction through the real gateway: a fact from turn 1 is still known at turn
50 through the summary, tool-call groups are never split, durable facts reach the memory
notes, and a failing summary call falls back to dropping the oldest turns."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gateway.sdk.tooling import ToolContext, ToolSpec
from gateway.sessions.compaction import SUMMARY_HEADING, SUMMARY_PROMPT
from gateway.sessions.history import TRIMMED_NOTE
from gateway.turn.memory import MemoryScope
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.harness import Harness, gateway_settings, running_gateway

FACT = "The code word is PLUM."
FILLER = "Here is some ordinary talk about the weather and the garden. " * 6


class _Topic(BaseModel):
    topic: str


def add_lookup_tool(gw: Harness) -> None:
    async def lookup(args: _Topic, ctx: ToolContext) -> str:
        return "\n".join(f"row {i}: {args.topic} detail" for i in range(40))

    gw.app.tools.register(ToolSpec("lookup", "look a topic up", _Topic, lookup, "test"))


def is_summary_request(request: dict[str, Any]) -> bool:
    first: str = request["messages"][0]["content"]
    return first == SUMMARY_PROMPT


def scripted_model(request: dict[str, Any]) -> Reply:
    """The summary model keeps the fact only when it sees it; the agent answers from what its
    request holds, and looks something up when asked to."""
    messages = request["messages"]
    if is_summary_request(request):
        material = messages[1]["content"]
        kept = f" {FACT}" if FACT in material else ""
        facts = f"\n- chat: {FACT}" if FACT in material else ""
        return Reply.text(f"Summary:\nWe chatted about the garden.{kept}\nFacts:{facts}")
    if messages[-1]["role"] == "tool":
        return Reply.text("Looked it up.")
    text = last_user_text(request)
    if "look up" in text:
        return Reply.call("lookup", topic="roses")
    if "code word" in text and "?" in text:
        seen = any(FACT in str(m.get("content")) for m in messages)
        return Reply.text("It is PLUM." if seen else "I do not know.")
    return Reply.text("Noted. " + FILLER[:120])


def assert_tool_groups_whole(messages: list[dict[str, Any]]) -> None:
    for i, message in enumerate(messages):
        if message.get("tool_calls"):
            ids = [call["id"] for call in message["tool_calls"]]
            following = messages[i + 1 : i + 1 + len(ids)]
            assert [m.get("tool_call_id") for m in following] == ids, messages
        if message.get("role") == "tool":
            before = messages[:i]
            owner = [m for m in before if m.get("tool_calls")]
            assert owner and message["tool_call_id"] in {
                c["id"] for c in owner[-1]["tool_calls"]
            }, messages


async def test_a_fact_from_turn_1_is_known_at_turn_50(tmp_path: Path, llm: ScriptedLLM) -> None:
    llm.responder = scripted_model
    settings = gateway_settings(tmp_path, llm.url, agent={"history_token_budget": 1000})
    async with running_gateway(settings) as gw:
        add_lookup_tool(gw)
        await gw.say(f"Please keep this in mind. {FACT} {FILLER}")
        for turn in range(2, 50):
            ask = "please look up roses" if turn % 4 == 0 else f"turn {turn}: {FILLER}"
            await gw.say(ask)
        outcome = await gw.say("What was the code word?")
        assert outcome.reply == "It is PLUM."

        agent_requests = [r for r in llm.requests if not is_summary_request(r)]
        summaries = [r for r in llm.requests if is_summary_request(r)]
        assert len(summaries) >= 5  # compacted many times, folding the summary in again
        last = agent_requests[-1]["messages"]
        # The fact reached turn 50 only through the summary in the system message.
        assert FACT in last[0]["content"] and SUMMARY_HEADING in last[0]["content"]
        assert not any(FACT in str(m.get("content")) for m in last[1:])
        for request in agent_requests:
            assert_tool_groups_whole(request["messages"][1:])
            assert TRIMMED_NOTE not in str(request["messages"])
        # Tool use reaches the summary model as one line, not the forty rows.
        material = "\n".join(r["messages"][1]["content"] for r in summaries)
        assert "lookup roses: row 0: roses detail (+39 lines)" in material
        assert "row 7: roses detail" not in material
        # The fact was offered to the memory notes, and /status shows the summary.
        notes = await gw.app.memory.entries(MemoryScope.CHAT, gw.console.chat, gw.console.user)
        assert FACT in notes
        status = await gw.say("/status")
        assert "Summary of" in (status.reply or "") and "earlier turn(s)" in (status.reply or "")
        record = await gw.app.sessions.load(gw.app.session_key(gw.console.inbound("x")))
        assert len(record.summary) < 1000 and record.summary_turns > 40


async def test_a_failed_summary_falls_back_to_dropping(
    tmp_path: Path, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    def failing_summaries(request: dict[str, Any]) -> Reply:
        if is_summary_request(request):
            return Reply.error(500, "summary model is down")
        return Reply.text("Noted.")

    llm.responder = failing_summaries
    settings = gateway_settings(tmp_path, llm.url, agent={"history_token_budget": 1000})
    async with running_gateway(settings) as gw:
        with caplog.at_level(logging.WARNING, logger="gateway.sessions.compaction"):
            for turn in range(12):
                outcome = await gw.say(f"turn {turn}: {FILLER}")
                assert outcome.reply == "Noted."
        assert any(is_summary_request(r) for r in llm.requests)
        assert "compaction summary failed, dropping the oldest turns" in caplog.text
        last = [r for r in llm.requests if not is_summary_request(r)][-1]["messages"]
        assert last[1]["content"] == TRIMMED_NOTE
        assert "turn 0:" not in str(last)
        record = await gw.app.sessions.load(gw.app.session_key(gw.console.inbound("x")))
        assert record.summary == ""
