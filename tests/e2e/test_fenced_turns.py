"""Fenced turns (issue 31): a live holder whose session lease lapses while its turn runs is
taken over; exactly one reply goes out, and the stale run stops before its next effect.

In one process on both stores (its renewals paused, as a stuck holder's would be: the
process's own claimer takes the session over), and with two `chatgate run` replicas on one
Redis where one is frozen with SIGSTOP mid-answer and thawed after the other answered. Also:
a stale run shows nothing of a streamed reply, and a crash between claiming the reply slot
and sending is counted, never answered twice.
"""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.telegram import FakeBotAPI
from tests.harness import Harness, eventually, gateway_settings, running_gateway
from tests.replicas import WEBHOOK_SECRET, base_env, post_webhook, start_replica

pytestmark = pytest.mark.e2e

TAKEN_OVER = "from the run that took over"
STALE = "from the stale run"


@pytest.fixture(params=["embedded", "redis"])
async def gw(
    tmp_path: Path, llm: ScriptedLLM, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    redis_url = request.getfixturevalue("redis_url") if request.param == "redis" else ""
    settings = gateway_settings(
        tmp_path, llm.url, redis_url=redis_url, router={"lease_ttl": 1}, llm={"stream": False}
    )
    async with running_gateway(settings) as harness:
        yield harness


async def test_a_lapsed_live_lease_is_taken_over_and_one_reply_goes_out(
    gw: Harness, llm: ScriptedLLM
) -> None:
    metrics = gw.app.metrics
    llm.push(Reply.text(STALE, delay=3), Reply.text(TAKEN_OVER))
    submission = await gw.submit("which run answers?")
    await llm.wait_for_requests(1)
    # The first run waits for its model; its lease is not renewed, as a stuck holder's is not.
    with gw.app.leases.renewals_paused():
        await llm.wait_for_requests(2, timeout=15)  # the claimer took the session over
    outcome = await asyncio.wait_for(submission.done, 15)
    assert outcome.reply == TAKEN_OVER
    # The first run gets its model's answer, tries to claim the reply slot and stops there.
    await eventually(lambda: metrics.total("turns_stale_stopped_total") == 1, 15, "stale stop")
    assert gw.texts == [TAKEN_OVER]
    assert submission.session is not None
    record = await gw.app.sessions.load(submission.session)
    assert [m["content"] for m in record.messages] == ["which run answers?", TAKEN_OVER]
    assert record.turns == 1
    assert await gw.app.store.pending(str(submission.session)) == []


# -- two replicas on one Redis ----------------------------------------------------------------

LEASE_TTL = "1.5"


def slow_first(text: str) -> Any:
    """Echo; the first request for `text` takes 4 s (the test freezes its replica during it)."""
    seen: set[str] = set()

    async def respond(request: dict[str, Any]) -> Reply:
        said = last_user_text(request)
        if said == text and said not in seen:
            seen.add(said)
            return Reply.text(f"echo: {said}", delay=4)
        return Reply.text(f"echo: {said}")

    return respond


async def metric(url: str, name: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/metrics") as response:
        for line in (await response.text()).splitlines():
            if line.startswith(f"chatgate_{name} "):
                return float(line.split()[1])
    return 0.0


async def test_a_frozen_replica_thaws_stale_and_sends_nothing(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    text = "frozen mid-answer"
    llm.responder = slow_first(text)
    async with FakeBotAPI() as tg:
        env = base_env(
            CHATGATE_TELEGRAM__TOKEN=tg.token,
            CHATGATE_TELEGRAM__API_URL=tg.url,
            CHATGATE_TELEGRAM__MODE="webhook",
            CHATGATE_TELEGRAM__WEBHOOK_URL="https://bot.example.org/telegram/webhook",
            CHATGATE_TELEGRAM__WEBHOOK_SECRET=WEBHOOK_SECRET,
            CHATGATE_REDIS__URL=redis_url,
            CHATGATE_REDIS__KEY_PREFIX=f"fence{uuid.uuid4().hex[:8]}",
            CHATGATE_LLM__BASE_URL=llm.url,
            CHATGATE_LLM__MODEL="fake-model",
            CHATGATE_LLM__STREAM="false",
            CHATGATE_ROUTER__LEASE_TTL=LEASE_TTL,
            CHATGATE_ROUTER__TYPING_DELAY="30",
            CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
            CHATGATE_SCHEDULER__ENABLED="false",
            CHATGATE_LOG_LEVEL="INFO",
        )
        survivor = await start_replica("survivor", tmp_path, env)
        frozen = await start_replica("frozen", tmp_path, env)
        try:
            update = {"update_id": 9101, "message": tg.message(text)}
            assert await post_webhook(frozen, update) == 200
            await llm.wait_for_requests(1, timeout=15)
            os.kill(frozen.proc.pid, signal.SIGSTOP)  # alive, but running nothing at all
            answer = f"echo: {text}"
            await eventually(lambda: answer in tg.texts(), 30, "the survivor's answer")
            os.kill(frozen.proc.pid, signal.SIGCONT)
            # Thawed, it has its model's answer; its next effect finds the session taken.
            await eventually(
                lambda: "stale turn stopped" in frozen.log.read_text(), 20, "the stale stop"
            )
            assert await metric(frozen.url, "turns_stale_stopped_total") == 1
            await asyncio.sleep(float(LEASE_TTL) + 1.5)  # time for any second answer to show
            assert [t for t in tg.texts() if t == answer] == [answer], tg.texts()
            assert "turn run again after its process stopped" in survivor.log.read_text()
        finally:
            for replica in (survivor, frozen):
                if replica.alive:
                    os.kill(replica.proc.pid, signal.SIGCONT)
                await replica.stop()


# -- a streamed reply ---------------------------------------------------------------------------


async def test_a_stale_run_shows_nothing_of_a_streamed_reply(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    """Streaming shows a reply before it is whole: the reply slot is claimed before the first
    draft, so the run that was taken over shows no draft, edit or message at all."""
    from tests.e2e.test_telegram import telegram_gateway

    stale_words = " ".join(f"stale{n}" for n in range(20))
    llm.push(
        Reply(content=stale_words, chunks=10, chunk_delay=0.05, delay=3),
        Reply.streamed(TAKEN_OVER, chunks=4, delay=0.05),
    )
    streaming = {"interval_ms": 150, "first_delay_ms": 0}
    async with telegram_gateway(
        tmp_path, llm, tg, streaming=streaming, router={"lease_ttl": 1, "typing_delay": 0}
    ) as app:
        tg.push_message("which run streams?")
        await llm.wait_for_requests(1, timeout=15)
        with app.leases.renewals_paused():
            await llm.wait_for_requests(2, timeout=15)
        await eventually(lambda: TAKEN_OVER in tg.texts(), 15, "the answer")
        await eventually(
            lambda: app.metrics.total("turns_stale_stopped_total") == 1, 15, "the stale stop"
        )
        shown = [c.text for c in tg.calls if c.method != "getUpdates"]
        assert not any("stale" in text for text in shown), shown
        assert tg.texts().count(TAKEN_OVER) == 1


async def test_a_crash_between_claiming_the_reply_and_sending_it_is_counted(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    """The one case that may lose a reply: the slot was claimed, the process died before the
    send. The run that takes over must not send it (the first may have), so it is logged and
    counted instead, and the conversation is saved with a note."""
    text = "killed before sending"
    async with FakeBotAPI() as tg:
        env = base_env(
            CHATGATE_TELEGRAM__TOKEN=tg.token,
            CHATGATE_TELEGRAM__API_URL=tg.url,
            CHATGATE_TELEGRAM__MODE="webhook",
            CHATGATE_TELEGRAM__WEBHOOK_URL="https://bot.example.org/telegram/webhook",
            CHATGATE_TELEGRAM__WEBHOOK_SECRET=WEBHOOK_SECRET,
            CHATGATE_REDIS__URL=redis_url,
            CHATGATE_REDIS__KEY_PREFIX=f"fence{uuid.uuid4().hex[:8]}",
            CHATGATE_LLM__BASE_URL=llm.url,
            CHATGATE_LLM__MODEL="fake-model",
            CHATGATE_LLM__STREAM="false",
            CHATGATE_ROUTER__LEASE_TTL=LEASE_TTL,
            CHATGATE_ROUTER__TYPING_DELAY="30",
            CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
            CHATGATE_SCHEDULER__ENABLED="false",
            CHATGATE_LOG_LEVEL="INFO",
        )
        survivor = await start_replica("survivor", tmp_path, env)
        doomed = await start_replica("doomed", tmp_path, env, crash_at="after_reply_claimed")
        try:
            update = {"update_id": 9201, "message": tg.message(text)}
            assert await post_webhook(doomed, update) == 200
            assert await asyncio.wait_for(doomed.proc.wait(), 15) == -9
            await eventually(
                lambda: "it may be lost" in survivor.log.read_text(), 20, "the re-run's log"
            )
            assert await metric(survivor.url, "replies_lost_in_crash_total") == 1
            assert tg.texts() == []  # never sent twice, so here never sent at all
            assert len(llm.requests) == 1  # the re-run did not ask the model again
        finally:
            await survivor.stop()
            await doomed.stop()
