"""A Discord message is written down on receipt (issue 31 item 6): the gateway never sends it
again, so a replica killed after receiving it, before storing it, must not lose it. Two
`chatgate run` replicas on one Redis against the fake Discord; the one holding the gateway
connection dies right after receipt, the other takes the connection over and answers."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.fakes.discord import BOT_ID, GENERAL_ID, FakeDiscord
from tests.fakes.llm import Reply, ScriptedLLM
from tests.replicas import base_env, model_env, start_replica

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

GENERAL = rf"/channels/{GENERAL_ID}/messages"


async def test_a_message_received_by_a_replica_that_dies_is_answered_by_the_next(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    async with FakeDiscord() as fake:
        env = base_env(
            **model_env(llm),
            CHATGATE_DISCORD__TOKEN="fake-token",
            CHATGATE_DISCORD__API_URL=fake.api_url,
            CHATGATE_DISCORD__GATEWAY_URL=fake.gateway_url,
            CHATGATE_DISCORD__GUILD_READY_TIMEOUT="0.05",
            CHATGATE_DISCORD__LEADER_TTL="1.5",
            CHATGATE_REDIS__URL=redis_url,
            CHATGATE_REDIS__KEY_PREFIX=f"dc{uuid.uuid4().hex[:8]}",
        )
        doomed = await start_replica("doomed", tmp_path, env, crash_at="discord_received")
        await fake.wait_connected(1, within=15)  # the first replica holds the connection
        survivor = await start_replica("survivor", tmp_path, env)
        try:
            llm.push(Reply.text("answered by the survivor"))
            await fake.send_message(f"<@{BOT_ID}> are you there?")
            # Killed right after writing it down.
            assert await asyncio.wait_for(doomed.proc.wait(), 15) == -9
            (reply,) = await fake.wait_for("POST", GENERAL, within=30)
            assert reply.body["content"] == "answered by the survivor"
            assert len(llm.requests) == 1
            assert "discord message received by a replica that stopped" in (
                survivor.log.read_text()
            )
        finally:
            await survivor.stop()
            await doomed.stop()
