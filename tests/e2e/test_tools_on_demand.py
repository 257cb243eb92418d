"""Tools on demand through the real gateway: a small core set plus one line per other group,
load_tools adds schemas for the rest of the session (within the same turn too), the policy
still decides what may be loaded, and /new starts from the core set again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gateway.config import ToolsSettings
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import gateway_settings, running_gateway


def offered(request: dict[str, Any]) -> set[str]:
    return {tool["function"]["name"] for tool in request.get("tools") or ()}


def loader_text(request: dict[str, Any]) -> str:
    tools = request.get("tools") or ()
    description: str = next(
        t["function"]["description"] for t in tools if t["function"]["name"] == "load_tools"
    )
    return description


async def test_core_set_and_group_lines_stay_small(tmp_path: Path, llm: ScriptedLLM) -> None:
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        llm.push(Reply.text("hi"))
        await gw.say("hello")
        first = llm.requests[0]
        core = set(ToolsSettings().core) & {t.name for t in gw.app.tools.all()}
        assert offered(first) == core | {"load_tools"}
        lines = loader_text(first)
        assert "- cron: reminders and scheduled prompts (schedule_job, list_jobs" in lines
        assert "- browser:" in lines and "- fs: workspace files (glob, search" in lines
        # System prompt plus every schema, as sent: under 2,500 tokens at ~4 characters each.
        size = len(first["messages"][0]["content"]) + len(json.dumps(first["tools"]))
        assert size / 4 < 2500, size


async def test_loaded_groups_stay_for_the_session(tmp_path: Path, llm: ScriptedLLM) -> None:
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        llm.push(
            Reply.call("load_tools", names=["cron"]),
            Reply.call("list_jobs"),
            Reply.text("No reminders yet."),
        )
        assert (await gw.say("what reminders do I have?")).reply == "No reminders yet."
        loading, listing, _ = llm.requests
        assert "list_jobs" not in offered(loading)
        assert tool_results(listing)[0].startswith("Loaded: ")
        assert {"schedule_job", "list_jobs"} <= offered(listing)
        assert "cron" not in loader_text(listing)
        llm.push(Reply.text("still here"))
        await gw.say("and now?")
        assert "schedule_job" in offered(llm.requests[-1])  # the next turn keeps them
        assert "Tools loaded: " in ((await gw.say("/status")).reply or "")
        await gw.say("/new")
        llm.push(Reply.text("fresh"))
        await gw.say("hello again")
        assert "schedule_job" not in offered(llm.requests[-1])


async def test_calling_an_allowed_tool_loads_it(tmp_path: Path, llm: ScriptedLLM) -> None:
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        llm.push(Reply.call("glob", pattern="*.md"), Reply.text("none"))
        await gw.say("which markdown files are there?")
        assert "glob" not in offered(llm.requests[0])
        assert not tool_results(llm.requests[1])[0].startswith("error")
        assert "glob" in offered(llm.requests[1])


async def test_the_policy_decides_what_may_be_loaded(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, tools={"deny": ["group:cron"]})
    async with running_gateway(settings) as gw:
        llm.push(
            Reply.call("load_tools", names=["cron", "browser"]),
            Reply.call("schedule_job", kind="message", text="x", when="in 1 hour"),
            Reply.text("Cannot schedule here."),
        )
        await gw.say("remind me")
        loading, loaded, answering = llm.requests
        assert "cron" not in loader_text(loading)
        result = tool_results(loaded)[0]
        assert "Loaded: browser_" in result and "Not available here: cron." in result
        assert "schedule_job" not in offered(loaded)
        assert tool_results(answering) == [
            "error: the tool 'schedule_job' is not allowed in this chat. Do not call it."
        ]


async def test_on_demand_off_offers_every_allowed_tool(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, tools={"on_demand": False})
    async with running_gateway(settings) as gw:
        llm.push(Reply.text("hi"))
        await gw.say("hello")
        names = offered(llm.requests[0])
        assert "load_tools" not in names and {"schedule_job", "glob", "browser_click"} <= names
