"""A Telegram webhook call is answered 200 once its raw update is stored, and read afterwards:
a `chatgate run` killed between the 200 and the reading loses nothing (the next start, or
another replica, reads the stored update), and answers it once."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.fakes.llm import ScriptedLLM
from tests.fakes.telegram import FakeBotAPI
from tests.replicas import post_webhook, start_replica, webhook_env

pytestmark = [pytest.mark.e2e]

STOPPED = "telegram updates received by a process that stopped"


async def test_an_update_answered_before_its_process_died_is_answered_once_after_restart(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    env = webhook_env(tg, llm)  # the embedded store, in the replica's data directory
    update = {"update_id": 8101, "message": tg.message("are you there?")}
    doomed = await start_replica("gateway", tmp_path, env, crash_at="telegram_received")
    try:
        assert await post_webhook(doomed, update) == 200
        # Killed when it starts reading the update it had already answered.
        assert await asyncio.wait_for(doomed.proc.wait(), 15) == -9
    finally:
        await doomed.stop()
    assert llm.requests == [] and tg.sent() == []
    restarted = await start_replica("gateway", tmp_path, env)  # same data directory
    try:
        [reply] = await tg.wait_sent(1, within=30)
        assert reply.text == "echo: are you there?"
        # Telegram may not have seen the first 200 and sends the call again: answered, once.
        assert await post_webhook(restarted, update) == 200
        await asyncio.sleep(1.0)
        assert len(tg.sent()) == 1 and len(llm.requests) == 1
        assert STOPPED in restarted.log.read_text()
    finally:
        await restarted.stop()


@pytest.mark.redis
async def test_an_update_answered_by_a_replica_that_died_is_answered_by_another(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM, redis_url: str
) -> None:
    env = webhook_env(
        tg,
        llm,
        CHATGATE_REDIS__URL=redis_url,
        CHATGATE_REDIS__KEY_PREFIX=f"tgrx{uuid.uuid4().hex[:8]}",
    )
    doomed = await start_replica("doomed", tmp_path, env, crash_at="telegram_received")
    survivor = await start_replica("survivor", tmp_path, env)
    try:
        update = {"update_id": 8201, "message": tg.message("still there?")}
        assert await post_webhook(doomed, update) == 200
        assert await asyncio.wait_for(doomed.proc.wait(), 15) == -9
        # Taken once the dead replica's heartbeat has lapsed (15 s) and a sweep looks.
        [reply] = await tg.wait_sent(1, within=60)
        assert reply.text == "echo: still there?"
        await asyncio.sleep(1.0)
        assert len(tg.sent()) == 1 and len(llm.requests) == 1
        assert STOPPED in survivor.log.read_text()
    finally:
        await survivor.stop()
        await doomed.stop()
