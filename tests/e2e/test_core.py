"""The core end to end: router, agent loop and tools through the console adapter, against a
scripted OpenAI-compatible server over real HTTP, on both store backends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gateway.intake.admission import Status
from gateway.sdk.messages import ChatKind, Inbound
from gateway.sdk.tooling import ToolContext, ToolSpec
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.harness import Harness, gateway_settings, running_gateway


@pytest.fixture(params=["embedded", "redis"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, backend: str, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    async with running_gateway(gateway_settings(tmp_path, llm.url, redis_url=redis_url)) as h:
        yield h


def chat_files(gw: Harness) -> Path:
    """The console chat's own workspace (tools.workspace_scope defaults to "chat")."""
    return gw.app.settings.workspace / "console-chat1"


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


async def test_plain_reply(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("Hello, Alice!"))
    outcome = await gw.say("hi")
    assert outcome.ok and outcome.reply == "Hello, Alice!"
    assert gw.texts == ["Hello, Alice!"]
    sent = llm.requests[0]
    assert sent["model"] == "fake-model"
    assert sent["messages"][0]["role"] == "system"
    assert sent["messages"][-1] == {"role": "user", "content": "hi"}
    assert {t["function"]["name"] for t in sent["tools"]} >= {"read_file", "write_file", "memory"}


async def test_multi_step_tool_use(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(
        Reply.call("write_file", path="plan.md", content="step one\nstep two"),
        Reply.call("read_file", path="plan.md"),
        Reply.text("The plan has two steps."),
    )
    outcome = await gw.say("write a plan and read it back")
    assert outcome.reply == "The plan has two steps."
    assert "created plan.md" in tool_results(llm.requests[1])[0]
    assert "2\tstep two" in tool_results(llm.requests[2])[0]
    assert (chat_files(gw) / "plan.md").read_text() == "step one\nstep two"


async def test_parallel_tool_calls(gw: Harness, llm: ScriptedLLM) -> None:
    chat_files(gw).mkdir()
    (chat_files(gw) / "a.txt").write_text("alpha")
    (chat_files(gw) / "b.txt").write_text("beta")
    llm.push(
        Reply.calls(("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})),
        Reply.text("alpha and beta"),
    )
    assert (await gw.say("read both")).reply == "alpha and beta"
    second = llm.requests[1]
    calls = second["messages"][-3]["tool_calls"]
    results = tool_messages(second)[-2:]
    assert [r["tool_call_id"] for r in results] == [c["id"] for c in calls]
    assert "alpha" in results[0]["content"] and "beta" in results[1]["content"]


async def test_malformed_arguments_then_self_correction(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(
        Reply(tool_calls=[("read_file", '{"path": "x.txt",,')]),
        Reply(tool_calls=[("read_file", {"offset": 3})]),
        Reply.call("write_file", path="x.txt", content="fixed"),
        Reply.text("done"),
    )
    assert (await gw.say("go")).reply == "done"
    first_error = tool_results(llm.requests[1])[0]
    assert first_error.startswith("error: invalid arguments for read_file")
    assert "not valid JSON" in first_error
    second_error = tool_results(llm.requests[2])[0]
    assert "path: Field required" in second_error
    assert "created x.txt" in tool_results(llm.requests[3])[0]


async def test_unknown_tool(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.call("launch_rockets", count=3), Reply.text("I cannot do that."))
    assert (await gw.say("launch")).reply == "I cannot do that."
    error = tool_results(llm.requests[1])[0]
    assert "no tool named 'launch_rockets'" in error and "read_file" in error


class _Nap(BaseModel):
    seconds: float


async def test_tool_timeout_and_crash(gw: Harness, llm: ScriptedLLM) -> None:
    async def nap(args: _Nap, ctx: ToolContext) -> str:
        await asyncio.sleep(args.seconds)
        return "rested"

    async def explode(args: _Nap, ctx: ToolContext) -> str:
        raise RuntimeError("boom")

    gw.app.tools.register(ToolSpec("nap", "sleep", _Nap, nap, "test", timeout=0.2))
    gw.app.tools.register(ToolSpec("explode", "crash", _Nap, explode, "test"))
    llm.push(
        Reply.calls(("nap", {"seconds": 30}), ("explode", {"seconds": 0})),
        Reply.text("both failed"),
    )
    started = time.monotonic()
    assert (await gw.say("nap")).reply == "both failed"
    assert time.monotonic() - started < 5
    timeout_msg, crash_msg = tool_results(llm.requests[1])
    assert "did not finish within 0.2 s and was stopped" in timeout_msg
    assert "failed unexpectedly (RuntimeError: boom)" in crash_msg


async def test_iteration_limit_then_final_answer(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, agent={"max_iterations": 3})
    llm.responder = lambda req: (
        Reply.text("Here is what I found so far.")
        if "tools" not in req
        else Reply.call("read_file", path="loop.txt")
    )
    async with running_gateway(settings) as gw:
        outcome = await gw.say("loop forever")
    assert outcome.reply == "Here is what I found so far."
    assert len(llm.requests) == 4
    assert all("tools" in r for r in llm.requests[:3])
    final = llm.requests[3]
    assert "tools" not in final
    assert "limit of tool use" in final["messages"][-1]["content"]


async def test_429_then_success(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.error(429, "slow down", headers={"Retry-After": "1"}), Reply.text("ok now"))
    started = time.monotonic()
    outcome = await gw.say("hi")
    assert outcome.reply == "ok now"
    assert time.monotonic() - started >= 0.9


async def test_llm_down_gives_one_clear_line(tmp_path: Path) -> None:
    settings = gateway_settings(tmp_path, "http://127.0.0.1:9/v1", llm={"max_retries": 1})
    async with running_gateway(settings) as gw:
        outcome = await gw.say("hello?")
    assert not outcome.ok
    assert outcome.error is not None and "\n" not in outcome.error
    assert "127.0.0.1:9" in outcome.error or "reach" in outcome.error.lower()
    assert gw.texts == [outcome.error]


async def test_new_clears_history(gw: Harness, llm: ScriptedLLM) -> None:
    await gw.say("my name is Ana")
    await gw.say("what is my name?")
    assert any(m.get("content") == "my name is Ana" for m in llm.requests[1]["messages"])
    reply = await gw.say("/new")
    assert reply.reply is not None and "new conversation" in reply.reply
    await gw.say("who am I?")
    contents = [m.get("content") for m in llm.requests[2]["messages"]]
    assert "my name is Ana" not in contents
    status = await gw.say("/status")
    assert status.reply is not None and "Messages in history: 2" in status.reply


async def test_two_messages_to_one_session_run_in_order(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("first answer", delay=0.5), Reply.text("second answer"))
    first = await gw.submit("one")
    second = await gw.submit("two")
    assert first.status is Status.STARTED and second.status is Status.QUEUED
    results = await asyncio.gather(first.done, second.done)
    assert [r.reply for r in results] == ["first answer", "second answer"]
    # The second turn saw the first one's answer: strictly one after the other.
    contents = [m.get("content") for m in llm.requests[1]["messages"]]
    assert contents[-3:] == ["one", "first answer", "two"]
    assert "after the current request" in gw.texts[0]


async def test_two_sessions_run_concurrently(gw: Harness, llm: ScriptedLLM) -> None:
    llm.responder = lambda req: Reply.text(f"re: {last_user_text(req)}", delay=1.5)
    started = time.monotonic()
    a, b = await asyncio.gather(gw.say("a", chat_id="c-a"), gw.say("b", chat_id="c-b"))
    assert (a.reply, b.reply) == ("re: a", "re: b")
    assert time.monotonic() - started < 2.7  # one after the other would take 3 s


async def test_repeated_event_id_processed_once(gw: Harness, llm: ScriptedLLM) -> None:
    first = await gw.submit("hi", event_id="evt-1")
    again = await gw.submit("hi", event_id="evt-1")
    assert again.status is Status.DUPLICATE
    await first.done
    assert len(llm.requests) == 1


async def test_history_survives_restart(
    tmp_path: Path, llm: ScriptedLLM, backend: str, request: pytest.FixtureRequest
) -> None:
    redis_url = request.getfixturevalue("redis_url") if backend == "redis" else ""
    settings = gateway_settings(tmp_path, llm.url, redis_url=redis_url)
    async with running_gateway(settings) as gw:
        await gw.say("remember: the code word is heron")
    async with running_gateway(settings) as gw:
        await gw.say("what was the code word?")
    contents = [m.get("content") for m in llm.requests[-1]["messages"]]
    assert "remember: the code word is heron" in contents
    assert "echo: remember: the code word is heron" in contents


async def test_empty_and_oversized_messages_refused(gw: Harness, llm: ScriptedLLM) -> None:
    empty = await gw.say("   ")
    assert empty.error is not None and "empty" in empty.error
    huge = await gw.say("x" * 20_000)
    assert huge.error is not None and "limit is 16,000" in huge.error
    assert gw.texts == [empty.error, huge.error]
    assert llm.requests == []


async def test_stop_cancels_running_turn(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("too late", delay=5))
    running = await gw.submit("long job")
    await llm.wait_for_requests(1)
    stop = await gw.say("/stop")
    assert stop.reply == "Stopped."
    outcome = await asyncio.wait_for(running.done, 2)
    assert outcome.cancelled
    assert "too late" not in gw.texts


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>{"name": "write_file", "arguments": {"path": "t.txt", "content": "hi"}}'
        "</tool_call>",
        '[TOOL_CALLS][{"name": "write_file", "arguments": {"path": "t.txt", "content": "hi"}}]',
        '{"name": "write_file", "parameters": {"path": "t.txt", "content": "hi"}}',
        '[write_file(path="t.txt", content="hi")]',
        '<function=write_file>{"path": "t.txt", "content": "hi"}</function>',
    ],
    ids=["hermes", "mistral", "llama3", "pythonic", "function-tag"],
)
async def test_text_mode_tool_calls(tmp_path: Path, llm: ScriptedLLM, reply: str) -> None:
    settings = gateway_settings(tmp_path, llm.url, llm={"tool_call_format": "text"})
    llm.push(Reply.text(reply), Reply.text("Wrote it."))
    async with running_gateway(settings) as gw:
        outcome = await gw.say("write hi to t.txt")
        assert outcome.reply == "Wrote it."
        assert (chat_files(gw) / "t.txt").read_text() == "hi"
    first, second = llm.requests
    assert "tools" not in first and "write_file" in first["messages"][0]["content"]
    # Tool results go back as a user message in text mode.
    assert second["messages"][-1]["role"] == "user"
    assert "created t.txt" in second["messages"][-1]["content"]


async def test_group_chatter_is_context_not_answered(gw: Harness, llm: ScriptedLLM) -> None:
    group = gw.console.chat.model_copy(update={"kind": ChatKind.GROUP, "chat_id": "g1"})

    def in_group(text: str, user: str, mentioned: bool) -> Inbound:
        base = gw.console.inbound(text, user_id=user)
        return base.model_copy(update={"chat": group, "mentioned": mentioned})

    chatter = await gw.app.admission.submit(in_group("lunch at noon?", "bob", False))
    assert chatter.status is Status.OBSERVED
    assert (await chatter.done).reply is None
    assert llm.requests == [] and gw.texts == []
    outcome = await (await gw.app.admission.submit(in_group("when is lunch?", "carol", True))).done
    assert outcome.ok
    user_text = llm.requests[0]["messages"][-1]["content"]
    assert "bob: lunch at noon?" in user_text and "carol: when is lunch?" in user_text
    # The context was used once, not repeated in later turns.
    await (await gw.app.admission.submit(in_group("thanks", "carol", True))).done
    assert "lunch at noon" not in llm.requests[1]["messages"][-1]["content"]


async def test_new_during_a_running_turn_is_not_undone(gw: Harness, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("slow answer", delay=1.0))
    running = await gw.submit("the secret is 7")
    queued = await gw.submit("and also 8")
    await llm.wait_for_requests(1)
    assert (await gw.say("/new")).reply is not None
    assert (await running.done).cancelled and (await queued.done).cancelled
    await gw.say("what was the secret?")
    contents = [m.get("content") for m in llm.requests[-1]["messages"]]
    assert "the secret is 7" not in contents and "and also 8" not in contents
