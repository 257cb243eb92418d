"""A steered turn whose replica dies after taking a follow-up in: the follow-up stayed in the
inbox, so the replica that takes the session over runs the turn again with it and answers
once. Two `chatgate run` processes on one Redis, Telegram webhooks, the scripted model."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.store.redis import RedisStore
from tests.fakes.llm import Reply, ScriptedLLM
from tests.fakes.telegram import FakeBotAPI
from tests.harness import eventually
from tests.replicas import WEBHOOK_SECRET, base_env, post_webhook, start_replica

pytestmark = pytest.mark.e2e

SESSION = "telegram:42"


def user_texts(request: dict[str, Any]) -> list[str]:
    return [
        str(m["content"]) for m in request["messages"] if m["role"] == "user" and m.get("content")
    ]


async def test_a_crash_after_steering_reruns_the_turn_with_the_follow_up_and_answers_once(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    prefix = f"steer{uuid.uuid4().hex[:8]}"
    store = RedisStore(redis_url, key_prefix=prefix)

    async def respond(request: dict[str, Any]) -> Reply:
        if not any(m["role"] == "tool" for m in request["messages"]):
            # The first step waits until the follow-up is stored, then calls a tool: the
            # follow-up is taken in at the step boundary after the tool's result.
            await eventually_pending(store, 2)
            return Reply.call("todo")
        return Reply.text("answered: " + " + ".join(user_texts(request)[-2:]))

    llm.responder = respond
    async with FakeBotAPI() as tg:
        env = base_env(
            CHATGATE_TELEGRAM__TOKEN=tg.token,
            CHATGATE_TELEGRAM__API_URL=tg.url,
            CHATGATE_TELEGRAM__MODE="webhook",
            CHATGATE_TELEGRAM__WEBHOOK_URL="https://bot.example.org/telegram/webhook",
            CHATGATE_TELEGRAM__WEBHOOK_SECRET=WEBHOOK_SECRET,
            CHATGATE_REDIS__URL=redis_url,
            CHATGATE_REDIS__KEY_PREFIX=prefix,
            CHATGATE_LLM__BASE_URL=llm.url,
            CHATGATE_LLM__MODEL="fake-model",
            CHATGATE_LLM__STREAM="false",
            CHATGATE_ROUTER__LEASE_TTL="1.5",
            CHATGATE_ROUTER__BUSY_MODE="steer",
            CHATGATE_ROUTER__TYPING_DELAY="30",
            CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
            CHATGATE_SCHEDULER__ENABLED="false",
            CHATGATE_LOG_LEVEL="INFO",
        )
        survivor = await start_replica("survivor", tmp_path, env)
        doomed = await start_replica("doomed", tmp_path, env, crash_at="after_steered")
        try:
            first = {"update_id": 7001, "message": tg.message("build it")}
            assert await post_webhook(doomed, first) == 200
            await eventually(lambda: len(llm.requests) >= 1, 20, "the first step")
            second = {"update_id": 7002, "message": tg.message("and run the tests")}
            assert await post_webhook(survivor, second) == 200
            # Killed (SIGKILL, its crash point) right after it took the follow-up in.
            assert await doomed.proc.wait() == -9
            await tg.wait_sent(1, within=30)
            assert tg.texts() == ["answered: build it + and run the tests"], tg.texts()
            # The re-run saw both from its first step; nothing is answered twice.
            rerun = [r for r in llm.requests[1:] if "build it" in user_texts(r)]
            assert rerun and "and run the tests" in user_texts(rerun[0])
            assert "turn run again" in survivor.log.read_text()
            await eventually_pending(store, 0)
            await _quiet()
            assert len(tg.sent()) == 1
        finally:
            await survivor.stop()
            await doomed.stop()
            await store.close()


async def eventually_pending(store: RedisStore, count: int, within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while len(await store.pending(SESSION)) != count:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{count} messages were not pending within {within} s")
        await asyncio.sleep(0.05)


async def _quiet() -> None:
    await asyncio.sleep(2.0)  # longer than a lease: any second run would have answered
