"""Poison messages (issue 30 finding 13, issue 31 item 5): a message whose turn raises every
time is tried 3 times, then set aside as a dead letter; the chat is told once, `/status`,
`chatgate doctor` and `chatgate dead-letters` show it, and a retry answers it."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.console.adapter import ConsoleAdapter
from gateway.sdk.messages import ChatRef, UserRef
from gateway.sessions.dead_letters import DEAD_LETTERED
from gateway.sessions.key import key_for
from gateway.store import store_for
from gateway.store.inbox import InboxEntry, IntakeRequest
from tests.fakes.llm import Reply, ScriptedLLM
from tests.harness import Harness, eventually, gateway_settings, running_gateway

pytestmark = pytest.mark.e2e


class BrokenSection:
    """A prompt section (an extension's) that raises while `broken`: every turn of the chat
    fails outside any tool's error handling, as a poison message's does."""

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0

    def __call__(self, chat: ChatRef, user: UserRef) -> str:
        self.calls += 1
        if self.broken:
            raise RuntimeError("the skills index is broken")
        return ""


@pytest.fixture(params=["embedded", "redis"])
async def gw(
    tmp_path: Path, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else ""
    settings = gateway_settings(tmp_path, llm.url, redis_url=redis_url)
    async with running_gateway(settings) as harness:
        yield harness


async def test_a_poison_message_is_tried_three_times_then_set_aside(
    gw: Harness, llm: ScriptedLLM
) -> None:
    section = BrokenSection()
    gw.app.extensions.add_prompt_section(section)
    metrics = gw.app.metrics
    submission = await gw.submit("this one breaks")
    outcome = await asyncio.wait_for(submission.done, 30)
    assert outcome.error == DEAD_LETTERED
    assert gw.texts == [DEAD_LETTERED]  # told once, not once per attempt
    assert section.calls == 3 and metrics.total("turns_failed_total") == 3
    assert metrics.total("dead_letters_total") == 1
    (letter,) = await gw.app.queue.dead_letters.list()
    assert letter.attempts == 3 and letter.text() == "this one breaks"
    assert letter.reason == "RuntimeError: the skills index is broken"
    assert await gw.app.store.pending(str(submission.session)) == []

    status = await gw.say("/status")
    assert "set aside after failing every attempt: 1" in (status.reply or "")

    # Fixed, and retried: the message is answered, once, and leaves the dead letters.
    section.broken = False
    llm.push(Reply.text("answered at last"))
    assert await gw.app.queue.dead_letters.retry(letter.id) is None
    await eventually(lambda: "answered at last" in gw.texts, 15, "the retried answer")
    assert await gw.app.queue.dead_letters.list() == []
    assert gw.texts.count(DEAD_LETTERED) == 1 and gw.texts.count("answered at last") == 1


async def chatgate(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway.app.cli",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_dead_letters_listed_retried_and_dropped_from_the_command_line(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    prefix = f"dl{uuid.uuid4().hex[:8]}"
    settings = gateway_settings(tmp_path, llm.url, redis_url=redis_url, key_prefix=prefix)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(
        CHATGATE_DATA_DIR=str(tmp_path / "cli"),
        CHATGATE_REDIS__URL=redis_url,
        CHATGATE_REDIS__KEY_PREFIX=prefix,
        CHATGATE_LLM__BASE_URL=llm.url,
        CHATGATE_LLM__MODEL="fake-model",
    )
    async with running_gateway(settings) as gw:
        section = BrokenSection()
        gw.app.extensions.add_prompt_section(section)
        first = await gw.submit("first poison")
        await asyncio.wait_for(first.done, 30)
        second = await gw.submit("second poison", chat_id="chat2")
        await asyncio.wait_for(second.done, 30)
        letters = {d.text(): d.id for d in await gw.app.queue.dead_letters.list()}
        assert set(letters) == {"first poison", "second poison"}

        code, out = await chatgate(env, "dead-letters", "list")
        assert code == 0 and letters["first poison"] in out and "second poison" in out, out
        code, out = await chatgate(env, "doctor")
        assert "FAIL  dead letters: 2 message(s) failed every attempt" in out, out

        section.broken = False
        llm.push(Reply.text("first, answered"))
        code, out = await chatgate(env, "dead-letters", "retry", letters["first poison"])
        assert code == 0, out
        # A running gateway picks the retried message up on its own.
        await eventually(lambda: "first, answered" in gw.texts, 15, "the retried answer")

        code, out = await chatgate(env, "dead-letters", "drop", letters["second poison"])
        assert code == 0, out
        code, out = await chatgate(env, "dead-letters", "list")
        assert code == 0 and out.strip() == "no dead letters", out
        code, out = await chatgate(env, "dead-letters", "retry", "no-such-id")
        assert code == 1 and "No dead letter 'no-such-id'" in out, out


async def test_a_message_whose_runs_end_their_process_is_set_aside_without_another_run(
    tmp_path: Path, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> None:
    """A message whose turn takes its process down (killed, out of memory) raises nothing
    anywhere a count could be kept: each replica that claims it dies in turn. Three claims
    whose owners never came back are three runs; the fourth claim sets it aside unrun."""
    redis_url = request.getfixturevalue("redis_url")
    prefix = f"dk{uuid.uuid4().hex[:8]}"
    for redis in (redis_url, ""):
        settings = gateway_settings(
            tmp_path / ("redis" if redis else "embedded"),
            llm.url,
            redis_url=redis,
            key_prefix=prefix,
        )
        inbound = ConsoleAdapter("chat1", "alice", echo=False).inbound("this one kills")
        session = str(key_for(inbound))
        store = store_for(settings)
        await store.open()
        try:
            stored = await store.intake(
                IntakeRequest(
                    session=session,
                    entry=InboxEntry(f"{prefix}-1", inbound.model_dump_json()),
                    seen=None,
                    seen_ttl=60,
                    max_queued=10,
                    max_total=100,
                    lease_owner="gone:1",  # the first replica to run it, killed mid-turn
                    lease_ttl=0.1,
                )
            )
            assert stored.claimed is not None and stored.claimed.attempt == 1
            for run in (2, 3):  # two more replicas take it over and die the same way
                await asyncio.sleep(0.2)
                (taken,) = await store.claim(f"gone:{run}", 0.1)
                assert taken.attempt == run
            await asyncio.sleep(0.2)
        finally:
            await store.close()

        calls = len(llm.requests)
        async with running_gateway(settings) as gw:
            await eventually(lambda: DEAD_LETTERED in gw.texts, 30, "the chat told once")
            (letter,) = await gw.app.queue.dead_letters.list()
            assert letter.attempts == 4 and letter.text() == "this one kills"
            assert letter.reason == (
                "RunsEndedWithTheirProcess: the process running it stopped during each of 3 runs"
            )
            assert await gw.app.store.pending(session) == []
            assert gw.texts == [DEAD_LETTERED]
        assert len(llm.requests) == calls  # the model was never asked: nothing ran again
