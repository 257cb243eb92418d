"""Skills and sub-agents through the real gateway and the scripted LLM."""

from __future__ import annotations

from pathlib import Path

from gateway.llm.types import Message
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import gateway_settings, running_gateway
from tools.agent.delegate import SUBAGENT_PROMPT


def tool_names(request: dict[str, object]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}  # type: ignore[attr-defined]


async def test_skill_index_in_prompt_and_loaded_on_demand(tmp_path: Path, llm: ScriptedLLM) -> None:
    llm.push(Reply.calls(("skill", {"name": "reminders"})), Reply.text("Scheduled."))
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        outcome = await gw.say("remind me to stretch every hour")
    assert outcome.reply == "Scheduled."
    system = llm.requests[0]["messages"][0]["content"]
    assert "- reminders: Turn requests like" in system
    assert "Choosing the kind" not in system  # only the index, not the body
    assert "Choosing the kind" in tool_results(llm.requests[1])[0]


async def test_delegate_runs_a_restricted_sub_agent(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, tools={"subagent": {"deny": ["write_file"]}})
    async with running_gateway(settings) as gw:
        # The chat's own workspace: the sub-agent works in its parent's.
        chat_files = gw.app.settings.workspace / "console-chat1"
        chat_files.mkdir()
        (chat_files / "notes.txt").write_text("the answer is 42")
        llm.push(
            Reply.call("delegate", task="Find the answer in notes.txt", context="user asked"),
            Reply.call("read_file", path="notes.txt"),  # the sub-agent's first step
            Reply.text("It says 42 (notes.txt, line 1)."),  # the sub-agent's report
            Reply.text("The answer is 42."),  # the parent's final answer
        )
        outcome = await gw.say("what is the answer? use a helper")
    assert outcome.reply == "The answer is 42."
    parent, child_1, child_2, parent_2 = llm.requests
    child_messages: list[Message] = child_1["messages"]
    assert child_messages[0]["content"] == SUBAGENT_PROMPT
    assert child_messages[1]["content"] == "Find the answer in notes.txt\n\nContext:\nuser asked"
    assert "write_file" in tool_names(parent) and "delegate" in tool_names(parent)
    assert not {"write_file", "delegate", "clarify"} & tool_names(child_1)
    assert "read_file" in tool_names(child_1)
    assert "the answer is 42" in tool_results(child_2)[0]
    report = tool_results(parent_2)[0]
    assert report.startswith("Sub-agent report, 2 steps, 1 tool calls:")
    assert "It says 42" in report
