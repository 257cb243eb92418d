"""A Teams message is stored before Teams gets its 200: a gateway killed right after storing
it (before answering the HTTP request) loses nothing. The restarted gateway answers the
stored message, and Teams' redelivery of the unacknowledged activity is not answered twice.
`chatgate run` subprocesses on one Redis against the fake Bot Framework."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import aiohttp
import pytest

from tests.fakes.llm import ScriptedLLM
from tests.fakes.teams import PERSONAL, FakeBotFramework
from tests.replicas import base_env, start_replica

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

LEASE_TTL = "1.5"


async def test_a_stored_message_survives_a_kill_before_the_200(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    async with FakeBotFramework() as bf:
        teams = bf.settings()
        env = base_env(
            CHATGATE_TEAMS__APP_ID=teams["app_id"],
            CHATGATE_TEAMS__APP_PASSWORD=teams["app_password"],
            CHATGATE_TEAMS__OPENID_METADATA_URL=teams["openid_metadata_url"],
            CHATGATE_TEAMS__TOKEN_URL=teams["token_url"],
            CHATGATE_TEAMS__ALLOW_LOCAL_URLS="true",
            CHATGATE_REDIS__URL=redis_url,
            CHATGATE_REDIS__KEY_PREFIX=f"teams{uuid.uuid4().hex[:8]}",
            CHATGATE_APPROVALS__SECRET="teams-replicas-share-this-secret",
            CHATGATE_LLM__BASE_URL=llm.url,
            CHATGATE_LLM__MODEL="fake-model",
            CHATGATE_LLM__STREAM="false",
            CHATGATE_ROUTER__LEASE_TTL=LEASE_TTL,
            CHATGATE_ROUTER__TYPING_DELAY="30",
            CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
            CHATGATE_SCHEDULER__ENABLED="false",
            CHATGATE_LOG_LEVEL="INFO",
        )
        activity = bf.activity(PERSONAL, text="do not lose me")
        doomed = await start_replica("gw", tmp_path, env, crash_at="after_intake")
        restarted = None
        try:
            endpoint = f"{doomed.url}/teams/messages"
            with pytest.raises(aiohttp.ClientError):
                await bf.deliver(endpoint, activity)  # killed before it answered
            assert await asyncio.wait_for(doomed.proc.wait(), 15) == -9
            assert bf.sent() == []

            restarted = await start_replica("gw", tmp_path, env)
            answer = await bf.wait_for_text("echo: do not lose me", seconds=30)
            assert answer.conversation == PERSONAL
            # Teams sends an activity it got no 200 for again; it is taken, not re-answered.
            assert await bf.deliver(f"{restarted.url}/teams/messages", activity) == 200
            await asyncio.sleep(float(LEASE_TTL) + 1.5)
            texts = [c.body.get("text") for c in bf.sent()]
            assert texts == ["echo: do not lose me"]
            assert len(llm.requests) == 1
        finally:
            if restarted is not None:
                await restarted.stop()
            await doomed.stop()
