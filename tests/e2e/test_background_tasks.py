"""Background delegation through the real gateway: the call returns at once, the person keeps
talking (another turn completes), the report arrives later as the agent's message and is in
the conversation the next turn sees; /tasks lists and cancels, /stop all cancels; what a task
uses counts in /usage; a task running when the gateway stops, or whose process is killed, is
marked interrupted and the chat is told after the next start."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.harness import Harness, eventually, gateway_settings, running_gateway
from tools.agent.delegate import SUBAGENT_PROMPT, DelegateTools

REPORT_HEAD = "[Background task "
ROOT = Path(__file__).resolve().parents[2]


def is_child(request: dict[str, Any]) -> bool:
    first: str = request["messages"][0]["content"]
    return first == SUBAGENT_PROMPT


class Scripted:
    """The parent sends a task off, chats, and relays reports; the child waits for `release`."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.child_started = asyncio.Event()

    async def __call__(self, request: dict[str, Any]) -> Reply:
        if is_child(request):
            self.child_started.set()
            await self.release.wait()
            return Reply.text("the answer is 42")
        last = request["messages"][-1]
        text = last_user_text(request)
        if last["role"] == "tool":
            return Reply.text("Sent it off; I will tell you when it is back.")
        if REPORT_HEAD in text:
            if "was interrupted" in text:
                return Reply.text("Sorry: the research task was interrupted.")
            found = "42" if "the answer is 42" in text else "nothing"
            return Reply.text(f"The research is back: {found}.")
        if "research" in text:
            return Reply.call("delegate", task="find the answer to everything", background=True)
        return Reply.text(f"chatting about: {text.splitlines()[-1]}")


def task_id(report: str) -> str:
    found = re.search(r"background task (t[0-9a-f]{6})", report)
    assert found, report
    return found.group(1)


async def send_off(gw: Harness, llm: ScriptedLLM, script: Scripted) -> str:
    outcome = await gw.say("please research this in the background")
    assert outcome.reply == "Sent it off; I will tell you when it is back."
    [result] = tool_results(llm.requests[-1])
    assert result.startswith("Started background task t")
    await asyncio.wait_for(script.child_started.wait(), 10)
    return task_id(result)


async def test_a_background_report_arrives_while_the_person_keeps_talking(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    script = Scripted()
    llm.responder = script
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        ident = await send_off(gw, llm, script)
        # The person goes on; the task is still running meanwhile.
        chat = await gw.say("how is the weather")
        assert chat.reply == "chatting about: how is the weather"
        assert "running" in ((await gw.say("/tasks")).reply or "")
        script.release.set()
        await eventually(lambda: "The research is back: 42." in gw.texts, what="the report")
        # The report and the agent's message about it are in the conversation.
        later = await gw.say("what did it find again")
        assert later.reply == "chatting about: what did it find again"
        messages = llm.requests[-1]["messages"]
        reports = [m for m in messages if m["role"] == "user" and REPORT_HEAD in str(m["content"])]
        assert len(reports) == 1 and "the answer is 42" in reports[0]["content"]
        assert ident in reports[0]["content"]
        assert {"role": "assistant", "content": "The research is back: 42."} in messages
        listing = (await gw.say("/tasks")).reply or ""
        assert f"{ident}: done" in listing


async def test_tasks_lists_and_cancels(tmp_path: Path, llm: ScriptedLLM) -> None:
    script = Scripted()
    llm.responder = script
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        ident = await send_off(gw, llm, script)
        assert f"{ident}: running" in ((await gw.say("/tasks")).reply or "")
        other = await gw.say(f"/tasks cancel {ident}", user_id="mallory")
        assert other.reply == "Only the person who started this task, or an admin, can cancel it."
        unknown = await gw.say("/tasks cancel t000000")
        assert unknown.reply == "No background task t000000 in this chat."
        assert (await gw.say(f"/tasks cancel {ident}")).reply == f"Cancelled task {ident}."
        assert f"{ident}: cancelled" in ((await gw.say("/tasks")).reply or "")
        [delegate] = [f for f in gw.app.tool_families if isinstance(f, DelegateTools)]
        assert delegate.background is not None
        record = await delegate.background.load(ident)
        assert record is not None and record.status == "cancelled"
        await asyncio.sleep(0.5)
        assert not any("research is back" in t for t in gw.texts)


async def test_a_task_running_at_shutdown_is_reported_interrupted_after_restart(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    script = Scripted()
    llm.responder = script
    settings = gateway_settings(tmp_path, llm.url)
    async with running_gateway(settings) as gw:
        ident = await send_off(gw, llm, script)
    async with running_gateway(settings) as gw:
        await eventually(
            lambda: "Sorry: the research task was interrupted." in gw.texts,
            what="the interruption told",
        )
        assert f"{ident}: interrupted" in ((await gw.say("/tasks")).reply or "")


async def test_stop_all_cancels_the_chats_background_tasks(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    script = Scripted()
    llm.responder = script
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        ident = await send_off(gw, llm, script)
        reply = (await gw.say("/stop all")).reply or ""
        assert "Cancelled 1 background task(s)." in reply
        assert f"{ident}: cancelled" in ((await gw.say("/tasks")).reply or "")


async def test_what_a_background_task_uses_counts_against_the_chats_usage(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    script = Scripted()

    async def respond(request: dict[str, Any]) -> Reply:
        reply = await script(request)
        if is_child(request):
            reply.usage = (1000, 1)  # the child's own, told apart from the turns' (10, 5)
        return reply

    llm.responder = respond
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        await send_off(gw, llm, script)
        script.release.set()
        await eventually(lambda: "The research is back: 42." in gw.texts, what="the report")
        # Two calls of the first turn, the child's one, and the turn that relayed the report.
        expected = 2 * 15 + 1001 + 15
        deadline = asyncio.get_running_loop().time() + 10
        while True:
            usage = (await gw.say("/usage")).reply or ""
            if f"this chat: {expected:,} tokens" in usage:
                break
            assert asyncio.get_running_loop().time() < deadline, usage
            await asyncio.sleep(0.2)


async def test_a_task_whose_process_is_killed_is_reported_interrupted(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    script = Scripted()
    llm.responder = script
    root = ROOT
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(
        PYTHONPATH=str(root),
        CHATGATE_DATA_DIR=str(tmp_path / "data"),
        CHATGATE_HTTP__ENABLED="false",
        CHATGATE_LLM__BASE_URL=llm.url,
        CHATGATE_LLM__MODEL="fake-model",
        CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
        CHATGATE_DELEGATION__BACKGROUND_HEARTBEAT_SECONDS="0.5",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.e2e.background_worker",
        cwd=root,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line == b"sent off\n", line
        await asyncio.wait_for(script.child_started.wait(), 30)
    finally:
        proc.kill()  # SIGKILL: nothing is cleaned up, the task's record says "running"
        await proc.wait()
    settings = gateway_settings(tmp_path, llm.url, delegation={"background_heartbeat_seconds": 0.5})
    async with running_gateway(settings) as gw:
        await eventually(
            lambda: "Sorry: the research task was interrupted." in gw.texts,
            within=20,
            what="the interruption told after the crash",
        )
        listing = (await gw.say("/tasks")).reply or ""
        assert ": interrupted" in listing
