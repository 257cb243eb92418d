"""More of the core end to end: one turn at a time across replicas, interrupt mode, the global
concurrency cap, memory and /forget, Redis going away, and typing paused during approvals."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

import gateway.turn.runner
from gateway.app.app import App
from gateway.config import ConfigError
from gateway.intake.admission import Status
from gateway.sdk.channels import Capabilities
from gateway.sdk.extensions import Command, CommandCall
from gateway.sdk.messages import ButtonPress, ChatRef, Outbound, SentRef, UserRef
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from gateway.store.embedded import EmbeddedStore
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fixtures_redis import RedisServer
from tests.harness import eventually, gateway_settings, running_gateway


async def test_one_turn_at_a_time_per_session_across_replicas(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    async def slow(request: dict[str, object]) -> Reply:
        return Reply.text(f"re: {last_user_text(request)}", delay=0.3)

    llm.responder = slow
    one = gateway_settings(
        tmp_path / "a",
        llm.url,
        redis_url=redis_url,
        key_prefix="replicas",
        scheduler={"enabled": False},
    )
    two = one.model_copy(update={"data_dir": tmp_path / "b"})
    async with running_gateway(one) as a, running_gateway(two) as b:
        # The same conversation reaches both replicas at once (Slack and webhooks spread).
        for n in range(6):
            replica = a if n % 2 == 0 else b
            submission = await replica.submit(f"m{n}", event_id=f"r-{n}")
            assert submission.status in (Status.STARTED, Status.QUEUED)

        # Whichever replica holds the session runs its stored messages, whoever took them in.
        def answers() -> list[str]:
            return sorted(t for t in a.texts + b.texts if t.startswith("re: "))

        await eventually(lambda: len(answers()) >= 6, 20, "six answers")
    assert answers() == [f"re: m{n}" for n in range(6)]
    # One "I will answer after" notice for the messages queued behind the first turn.
    notices = [t for t in a.texts + b.texts if not t.startswith("re: ")]
    assert notices == ["Got it. I will answer this after the current request."]
    # Each turn saw every earlier turn's question and answer: they never overlapped.
    for request in llm.requests:
        users = [m["content"] for m in request["messages"] if m["role"] == "user"]
        replies = [m["content"] for m in request["messages"] if m["role"] == "assistant"]
        assert replies == [f"re: {u}" for u in users[:-1]]
    # ...and every turn saw all of them: the n-th call carries n questions.
    counts = sorted(sum(m["role"] == "user" for m in r["messages"]) for r in llm.requests)
    assert counts == [1, 2, 3, 4, 5, 6]


async def test_interrupt_mode_cancels_the_running_turn(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, router={"busy_mode": "interrupt"})
    llm.push(Reply.text("old answer", delay=5), Reply.text("new answer"))
    async with running_gateway(settings) as gw:
        first = await gw.submit("write an essay")
        await llm.wait_for_requests(1)
        second = await gw.submit("actually, just a haiku")
        assert second.status is Status.QUEUED
        assert (await asyncio.wait_for(first.done, 3)).cancelled
        assert (await second.done).reply == "new answer"
        assert gw.texts == ["new answer"]
    # The interrupted request stays in the history, marked, so the model knows.
    contents = [m.get("content") for m in llm.requests[1]["messages"]]
    assert "write an essay" in contents and gateway.turn.runner.INTERRUPTED_NOTE in contents


async def test_global_concurrency_cap(tmp_path: Path, llm: ScriptedLLM) -> None:
    settings = gateway_settings(tmp_path, llm.url, router={"max_concurrent_turns": 2})
    llm.responder = lambda req: Reply.text("ok", delay=0.4)
    async with running_gateway(settings) as gw:
        started = time.monotonic()
        outcomes = await asyncio.gather(*(gw.say(f"q{i}", chat_id=f"c{i}") for i in range(4)))
        elapsed = time.monotonic() - started
    assert all(o.reply == "ok" for o in outcomes)
    assert 0.75 < elapsed < 2.0  # two waves of two, not one wave of four


async def test_memory_notes_reach_new_sessions_and_forget_wipes_the_chat(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        llm.push(
            Reply.calls(
                ("memory", {"action": "add", "target": "user", "text": "likes tea"}),
                ("memory", {"action": "add", "text": "team standup is at 9"}),
            ),
            Reply.text("Noted."),
        )
        assert (await gw.say("remember I like tea and standup is at 9")).reply == "Noted."
        shown = (await gw.say("/memory")).reply or ""
        assert "- likes tea" in shown and "- team standup is at 9" in shown
        await gw.say("/new")
        await gw.say("hello again")
        system = llm.requests[-1]["messages"][0]["content"]
        assert "likes tea" in system and "team standup is at 9" in system
        forgot = (await gw.say("/forget")).reply or ""
        assert "Forgot this chat" in forgot
        shown = (await gw.say("/memory")).reply or ""
        assert "team standup" not in shown and "likes tea" in shown  # personal notes stay
        await gw.say("anything?")
        assert len([m for m in llm.requests[-1]["messages"] if m["role"] == "user"]) == 1


async def test_redis_outage_refuses_clearly_then_recovers(tmp_path: Path, llm: ScriptedLLM) -> None:
    server = RedisServer(tmp_path)
    server.start()
    settings = gateway_settings(
        tmp_path, llm.url, redis_url=server.url, scheduler={"enabled": False}
    )
    try:
        async with running_gateway(settings) as gw:
            assert (await gw.say("before")).reply == "echo: before"
            server.stop()
            down = await gw.say("during")
            assert down.error is not None and "storage is unreachable" in down.error
            assert gw.texts[-1] == down.error  # told, not silently dropped
            server.start()
            assert (await gw.say("after")).reply == "echo: after"
    finally:
        server.stop()


class _Cmd(BaseModel):
    command: str


class TypingRecorder:
    platform = "rec"
    capabilities = Capabilities(max_len=10_000, buttons=True, typing=True)

    def __init__(self) -> None:
        self.typing_at: list[float] = []
        self.sent: list[Outbound] = []

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, out: Outbound) -> SentRef:
        self.sent.append(out)
        return SentRef(chat=out.chat, message_id=str(len(self.sent)))

    async def edit(self, ref: SentRef, out: Outbound) -> None: ...

    async def typing(self, chat: ChatRef) -> None:
        self.typing_at.append(time.monotonic())


async def test_typing_pauses_while_waiting_for_approval(
    tmp_path: Path, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway.turn.runner, "TYPING_EVERY", 0.05)
    rec = TypingRecorder()
    settings = gateway_settings(tmp_path, llm.url)
    async with running_gateway(settings, adapters=[rec]) as gw:

        async def handler(args: _Cmd, ctx: ToolContext) -> str:
            return "ran"

        async def approval(args: _Cmd, ctx: ToolContext) -> ApprovalNeed:
            return ApprovalNeed(summary=args.command, reason="test")

        gw.app.tools.register(ToolSpec("danger", "d", _Cmd, handler, "test", approval))
        llm.push(Reply.call("danger", command="rm -rf x"), Reply.text("done", delay=0.3))
        chat = ChatRef(platform="rec", chat_id="1")
        user = UserRef(platform="rec", user_id="u")
        inbound = gw.console.inbound("go").model_copy(update={"chat": chat, "sender": user})
        turn = await gw.app.admission.submit(inbound)
        for _ in range(100):
            if rec.sent:
                break
            await asyncio.sleep(0.02)
        prompt = rec.sent[0]
        await asyncio.sleep(0.1)  # let a typing call already under way finish
        asked_at = time.monotonic()
        await asyncio.sleep(0.4)
        during = [t for t in rec.typing_at if t > asked_at]
        data = next(b.data for row in prompt.buttons for b in row if b.label == "Approve once")
        await gw.app.extensions.press(ButtonPress(event_id="p", chat=chat, user=user, data=data))
        assert (await turn.done).reply == "done"
    assert rec.typing_at and rec.typing_at[0] < asked_at  # typing ran before the prompt
    assert during == []  # and paused while the person decided
    assert any(t > asked_at + 0.4 for t in rec.typing_at)  # and resumed after


async def test_a_command_that_fails_answers_in_one_line(tmp_path: Path, llm: ScriptedLLM) -> None:
    async def broken(call: CommandCall) -> str:
        raise RuntimeError("bug in a command")

    async with running_gateway(gateway_settings(tmp_path, llm.url)) as gw:
        gw.app.extensions.add_command(Command("broken", "fails", broken))
        outcome = await gw.say("/broken now")
        assert outcome.reply == "Something went wrong running /broken; please try again."
        assert (await gw.say("/help")).reply is not None  # the gateway goes on
        assert llm.requests == []


def test_a_gateway_that_fails_to_build_releases_the_embedded_store(tmp_path: Path) -> None:
    settings = gateway_settings(
        tmp_path, "http://llm.invalid/v1", tools={"allow": ["no_such_tool"]}
    )
    with pytest.raises(ConfigError, match="no_such_tool"):
        App(settings)
    EmbeddedStore(settings.data_dir).abandon()  # the lock is free again
