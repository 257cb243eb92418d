"""End to end through the real gateway: a chat's tool profile hides a tool and a call to it is
refused; and clarify's question is answered by the user's next typed message."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.intake.admission import Status
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import gateway_settings, running_gateway

pytestmark = pytest.mark.e2e


async def test_a_chat_profile_hides_a_tool_and_a_call_to_it_is_refused(tmp_path: Path) -> None:
    tools = {
        "profiles": {"readonly": {"allow": ["group:fs", "group:web"], "deny": ["write_file"]}},
        "chat_profiles": {"console:chat1": "readonly"},
    }
    async with ScriptedLLM() as llm:
        settings = gateway_settings(tmp_path, llm.url, tools=tools)
        async with running_gateway(settings) as gw:
            llm.push(
                Reply.call("write_file", path="pwned.txt", content="x"),
                Reply.text("I may not write files here."),
            )
            outcome = await gw.say("write pwned.txt")
            assert outcome.reply == "I may not write files here."
            offered = {t["function"]["name"] for t in llm.requests[0]["tools"]}
            assert "write_file" not in offered and "memory" not in offered
            assert {"read_file", "edit_file", "web_fetch"} <= offered
            (refusal,) = tool_results(llm.requests[1])
            assert refusal == (
                "error: the tool 'write_file' is not allowed in this chat. Do not call it."
            )
            assert not (settings.workspace / "console-chat1" / "pwned.txt").exists()

            # Another chat has no profile: the same call runs there.
            llm.push(Reply.call("write_file", path="ok.txt", content="x"), Reply.text("done"))
            assert (await gw.say("write ok.txt", chat_id="chat2")).reply == "done"
            offered = {t["function"]["name"] for t in llm.requests[2]["tools"]}
            assert {"write_file", "memory"} <= offered
            assert (settings.workspace / "console-chat2" / "ok.txt").read_text() == "x"


async def test_clarify_answer_by_typing(tmp_path: Path) -> None:
    async with ScriptedLLM() as llm:
        settings = gateway_settings(tmp_path, llm.url, tools={"clarify_timeout": 10})
        async with running_gateway(settings) as gw:
            llm.push(
                Reply.call("clarify", question="Which colour?", choices=["red", "blue"]),
                Reply.text("Painting it blue."),
            )
            first = await gw.submit("paint the shed")
            await llm.wait_for_requests(1)
            async with asyncio.timeout(5):
                while True:
                    gw.console.received.clear()
                    if any("Which colour?" in t for t in gw.texts):
                        break
                    await gw.console.received.wait()
            assert "1. red\n2. blue" in gw.texts[-1]  # the console has no buttons
            answer = await gw.submit("2")
            assert answer.status is Status.ANSWERED
            outcome = await first.done
            assert outcome.reply == "Painting it blue."
            assert tool_results(llm.requests[1]) == ["alice answered: blue"]
