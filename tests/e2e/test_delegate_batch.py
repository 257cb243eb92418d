"""Parallel delegation through the real gateway: a batch of three sub-agents runs at once (each
first request waits for the others to arrive, which only concurrent children pass), one
failing and one out of time never fail the third, the depth limit holds, and an approval
asked by a sub-agent names its sub-task."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.e2e.test_approvals import add_danger_tool, button, press, prompt_of
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.harness import gateway_settings, running_gateway
from tools.agent.delegate import SUBAGENT_PROMPT


def is_child(request: dict[str, Any]) -> bool:
    first: str = request["messages"][0]["content"]
    return first == SUBAGENT_PROMPT


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


class Children:
    """Answers sub-agent requests; their first requests meet at a barrier."""

    def __init__(self, tasks: list[str]) -> None:
        self.tasks = tasks
        self.expected = len(tasks)
        self.arrived = 0
        self.all_here = asyncio.Event()

    async def __call__(self, request: dict[str, Any]) -> Reply:
        if not is_child(request):  # the parent delegates, then answers
            if request["messages"][-1]["role"] == "tool":
                return Reply.text("All reported.")
            return Reply.calls(("delegate", {"tasks": self.tasks}))
        task = last_user_text(request)
        if request["messages"][-1]["role"] == "user":
            self.arrived += 1
            if self.arrived == self.expected:
                self.all_here.set()
            try:
                await asyncio.wait_for(self.all_here.wait(), 5)
            except TimeoutError:
                return Reply.text("ran alone: the children did not run at once")
        if "broken" in task:
            return Reply.error(500, "this model is down")
        if "slow" in task:
            return Reply.text("too late", delay=3.0)
        return Reply.text(f"report on {task.split()[0]}")


async def test_three_tasks_run_at_once_and_failures_stay_their_own(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    tasks = ["alpha: count files", "broken one", "slow one"]
    children = Children(tasks)
    llm.responder = children
    settings = gateway_settings(tmp_path, llm.url, agent={"subagent_max_seconds": 1.0})
    async with running_gateway(settings) as gw:
        outcome = await gw.say("do three things at once")
        assert outcome.reply == "All reported."
        [report] = tool_results(llm.requests[-1])
        assert children.all_here.is_set()
        assert "ran alone" not in report
        assert report.startswith("Sub-agent reports: 1 of 3 tasks finished.")
        assert "## Task 1: alpha: count files\nStatus: done" in report
        assert "report on alpha:" in report
        assert "## Task 2: broken one\nStatus: failed:" in report
        assert "## Task 3: slow one\nStatus: timed out after 1 s" in report


async def test_a_batch_larger_than_max_parallel_is_refused(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    settings = gateway_settings(tmp_path, llm.url, delegation={"max_parallel": 2})
    async with running_gateway(settings) as gw:
        tasks = [f"t{i}" for i in range(3)]
        llm.push(Reply.calls(("delegate", {"tasks": tasks})), Reply.text("ok"))
        await gw.say("go")
        assert tool_results(llm.requests[-1]) == [
            "error: at most 2 tasks at once; send the rest in another call."
        ]
        assert not any(is_child(r) for r in llm.requests)


async def test_depth_limit(tmp_path: Path, llm: ScriptedLLM) -> None:
    # Default depth 1: a sub-agent is not offered delegate, and calling it is refused.
    async with running_gateway(gateway_settings(tmp_path / "one", llm.url)) as gw:
        llm.push(
            Reply.call("delegate", task="research"),
            Reply.call("delegate", task="deeper"),  # the child tries anyway
            Reply.text("child done"),
            Reply.text("parent done"),
        )
        assert (await gw.say("go")).reply == "parent done"
        parent, child, child_2, _ = llm.requests
        assert "delegate" in offered(parent) and "delegate" not in offered(child)
        assert tool_results(child_2) == [
            "error: the tool 'delegate' is not allowed in this chat. Do not call it."
        ]
    llm.requests.clear()
    # Depth 2: the child may delegate once more; the grandchild may not.
    settings = gateway_settings(tmp_path / "two", llm.url, delegation={"max_depth": 2})
    async with running_gateway(settings) as gw:
        llm.push(
            Reply.call("delegate", task="research"),
            Reply.call("delegate", task="deeper"),
            Reply.text("grandchild done"),
            Reply.text("child done"),
            Reply.text("parent done"),
        )
        assert (await gw.say("go")).reply == "parent done"
        parent, child, grandchild, child_2, parent_2 = llm.requests
        assert "delegate" in offered(child) and "delegate" not in offered(grandchild)
        assert "grandchild done" in tool_results(child_2)[0]
        assert "child done" in tool_results(parent_2)[0]


async def test_an_approval_from_a_sub_task_names_it(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, access={"admins": ["console:boss"]})
    async with running_gateway(settings) as gw:
        ran = add_danger_tool(gw)

        async def respond(request: dict[str, Any]) -> Reply:
            if not is_child(request):
                if request["messages"][-1]["role"] == "tool":
                    return Reply.text("parent done")
                tasks = ["read the logs", "clean the cache"]
                return Reply.calls(("delegate", {"tasks": tasks}))
            task = last_user_text(request)
            if request["messages"][-1]["role"] == "tool":
                return Reply.text(f"{task} finished")
            if task == "clean the cache":
                return Reply.call("danger", command="rm -rf cache")
            return Reply.text(f"{task} finished")

        llm.responder = respond
        turn = await gw.submit("tidy up")
        prompt = await prompt_of(gw)
        assert "sub-task 2/2 (clean the cache): it deletes files" in prompt.text
        await press(gw, button(prompt, "Approve once"))
        assert (await turn.done).reply == "parent done"
        assert ran == ["rm -rf cache"]
