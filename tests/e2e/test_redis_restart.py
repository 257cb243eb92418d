"""Redis restarted mid-run (issue 31): every connection of the store is cut while turns run and
webhook calls arrive, Redis comes back on the same port with its data (append-only file,
each write synced), and every message is answered exactly once: none lost, none twice.

Two `chatgate run` replicas take Telegram webhooks from a client that sends a call again
until it is answered 200 (as Telegram does); calls that arrive while Redis is down are
answered 503, not 200, so nothing is acknowledged that was not stored (the chat is told the
message was not taken; the call sent again is then answered).
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway.intake.admission import STORE_DOWN
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.telegram import FakeBotAPI
from tests.fixtures_redis import RedisServer
from tests.harness import eventually
from tests.replicas import (
    Replica,
    base_env,
    model_env,
    post_webhook,
    start_replica,
    telegram_webhook_env,
)

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

CHATS = 12
LEASE_TTL = "1.5"


async def echo_after_a_while(request: dict[str, Any]) -> Reply:
    return Reply.text(f"echo: {last_user_text(request)}", delay=0.4)


def replica_env(tg: FakeBotAPI, llm: ScriptedLLM, redis_url: str) -> dict[str, str]:
    return base_env(
        **telegram_webhook_env(tg),
        **model_env(llm),
        CHATGATE_REDIS__URL=redis_url,
        CHATGATE_REDIS__KEY_PREFIX=f"restart{uuid.uuid4().hex[:8]}",
        CHATGATE_ROUTER__LEASE_TTL=LEASE_TTL,
        CHATGATE_ROUTER__QUEUE_NOTICE="false",
    )


async def deliver(replicas: list[Replica], update: dict[str, Any], start: int) -> None:
    """Send the update until a replica answers 200, trying them in turn (a balancer with
    Telegram's retries); a 503 while Redis is down is sent again a moment later."""
    deadline = asyncio.get_running_loop().time() + 90
    for attempt in itertools.count(start):
        if await post_webhook(replicas[attempt % len(replicas)], update) == 200:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"update {update['update_id']} never taken")
        await asyncio.sleep(0.2)


async def test_a_redis_restart_mid_run_loses_nothing_and_answers_nothing_twice(
    tmp_path: Path, llm: ScriptedLLM
) -> None:
    llm.responder = echo_after_a_while
    redis_dir = tmp_path / "redis"
    redis_dir.mkdir()
    redis = RedisServer(redis_dir, persistent=True)
    redis.start()
    try:
        async with FakeBotAPI() as tg:
            env = replica_env(tg, llm, redis.url)
            replicas = list(
                await asyncio.gather(
                    start_replica("a", tmp_path, env), start_replica("b", tmp_path, env)
                )
            )
            try:
                await run_through_a_restart(tg, llm, redis, replicas)
            finally:
                for replica in replicas:
                    await replica.stop()
    finally:
        redis.stop()


async def run_through_a_restart(
    tg: FakeBotAPI, llm: ScriptedLLM, redis: RedisServer, replicas: list[Replica]
) -> None:
    texts = [
        f"{round_} from chat {chat}" for round_ in ("first", "second") for chat in range(CHATS)
    ]
    updates = [
        {"update_id": 7000 + n, "message": tg.message(text, chat_id=100 + n % CHATS)}
        for n, text in enumerate(texts)
    ]
    # The first round is stored and its turns are waiting for the model when Redis stops.
    await asyncio.gather(*(deliver(replicas, u, n) for n, u in enumerate(updates[:CHATS])))
    await eventually(lambda: len(llm.requests) >= 1, 20, "a turn asking the model")
    redis.stop()
    # The second round arrives while Redis is down: refused (503) until it is back.
    second = asyncio.gather(*(deliver(replicas, u, n) for n, u in enumerate(updates[CHATS:])))
    await asyncio.sleep(1.5)
    redis.start()
    await second

    def answered() -> bool:
        return all(f"echo: {text}" in tg.texts() for text in texts)

    try:
        await eventually(answered, 60, "every message answered")
    except AssertionError:
        logs = "\n\n".join(f"== {r.name}\n{r.tail(40)}" for r in replicas)
        raise AssertionError(f"not all answered: {tg.texts()}\n{logs}") from None
    # Long enough for a lapsed lease to be claimed and any second reply to be sent.
    await asyncio.sleep(float(LEASE_TTL) * 2 + 1)
    answers = [t for t in tg.texts() if t.startswith("echo: ")]
    assert sorted(answers) == sorted(f"echo: {text}" for text in texts), answers
    for chat in range(CHATS):  # each chat answered in the order it asked
        assert [t for t in tg.texts(100 + chat) if t.startswith("echo: ")] == [
            f"echo: first from chat {chat}",
            f"echo: second from chat {chat}",
        ]
    # What else was said: that a message sent while Redis was down was not taken (it was
    # sent again and answered above).
    assert set(tg.texts()) - set(answers) <= {STORE_DOWN}
