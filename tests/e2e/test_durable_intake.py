"""Nothing lost when a replica dies (issue 20).

Two `chatgate run` replicas on one Redis take Telegram webhooks; one is killed with SIGKILL
at each point of a turn (right after intake, during the LLM call, after the reply was sent
but before the turn was marked done) and the message is answered exactly once by the other.
Also: Telegram polling never confirms an update it did not store, and Slack's retry after
a kill is answered once.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.slack import BOT_TOKEN, FakeSlack
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

pytestmark = pytest.mark.e2e

SIGNING_SECRET = "replica-signing-secret"
LEASE_TTL = "1.5"  # short, so that a dead replica's session is taken over within seconds


def echo_slowly(slow_first: set[str]) -> Any:
    """Echo each message; the first request for a text in `slow_first` takes 30 s (the test
    kills the replica during it)."""

    async def respond(request: dict[str, Any]) -> Reply:
        text = last_user_text(request)
        if text in slow_first:
            slow_first.discard(text)
            return Reply.text(f"echo: {text}", delay=30)
        return Reply.text(f"echo: {text}")

    return respond


def replica_env(
    tg: FakeBotAPI, slack: FakeSlack, llm: ScriptedLLM, redis_url: str
) -> dict[str, str]:
    return base_env(
        **telegram_webhook_env(tg),
        **model_env(llm),
        CHATGATE_SLACK__BOT_TOKEN=BOT_TOKEN,
        CHATGATE_SLACK__SIGNING_SECRET=SIGNING_SECRET,
        CHATGATE_SLACK__API_URL=slack.api_url,
        CHATGATE_REDIS__URL=redis_url,
        CHATGATE_REDIS__KEY_PREFIX=f"durable{uuid.uuid4().hex[:8]}",
        CHATGATE_ROUTER__LEASE_TTL=LEASE_TTL,
        CHATGATE_TOOLS__TERMINAL__ALLOW_UNSANDBOXED="true",
    )


@pytest.fixture
async def fakes() -> AsyncIterator[tuple[FakeBotAPI, FakeSlack]]:
    async with FakeBotAPI() as tg, FakeSlack() as slack:
        yield tg, slack


def answers(tg: FakeBotAPI, text: str) -> list[str]:
    return [t for t in tg.texts() if t == f"echo: {text}"]


async def answered_once(tg: FakeBotAPI, text: str, replicas: list[Replica]) -> None:
    try:
        await eventually(lambda: len(answers(tg, text)) >= 1, 20, f"an answer to {text!r}")
    except AssertionError:
        logs = "\n\n".join(f"== {r.name}\n{r.tail(30)}" for r in replicas)
        raise AssertionError(f"{text!r} was not answered\n{logs}") from None
    # Long enough for any second replica to have claimed and answered it again.
    await asyncio.sleep(float(LEASE_TTL) + 1.5)
    assert answers(tg, text) == [f"echo: {text}"], tg.texts()


async def test_a_killed_replica_loses_nothing_and_answers_nothing_twice(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str, fakes: tuple[FakeBotAPI, FakeSlack]
) -> None:
    tg, slack = fakes
    slow: set[str] = set()
    llm.responder = echo_slowly(slow)
    env = replica_env(tg, slack, llm, redis_url)
    survivor = await start_replica("survivor", tmp_path, env)
    replicas = [survivor]
    try:
        # 1. Killed right after intake stored the message. Its webhook call was answered once
        #    the raw update was stored, before it was read; should Telegram deliver it again
        #    anyway (to the survivor), that copy is dropped as a repeat.
        doomed = await start_replica("a", tmp_path, env, crash_at="after_intake")
        replicas.append(doomed)
        update = {"update_id": 9001, "message": tg.message("stored then killed")}
        assert await post_webhook(doomed, update) == 200
        assert await doomed.proc.wait() == -9
        assert await post_webhook(survivor, update) == 200
        await answered_once(tg, "stored then killed", replicas)

        # 2. Killed during the LLM call.
        doomed = await start_replica("b", tmp_path, env)
        replicas.append(doomed)
        slow.add("killed mid-answer")
        asked = len(llm.requests)
        assert (
            await post_webhook(
                doomed, {"update_id": 9002, "message": tg.message("killed mid-answer")}
            )
            == 200
        )
        await eventually(lambda: len(llm.requests) > asked, 10, "the LLM call")
        doomed.kill()
        await answered_once(tg, "killed mid-answer", replicas)

        # 3. Killed after the reply went out, before the turn was marked done: the survivor
        #    runs the turn again, finds the reply recorded, and does not send it twice.
        doomed = await start_replica("c", tmp_path, env, crash_at="before_finish")
        replicas.append(doomed)
        update = {"update_id": 9003, "message": tg.message("answered then killed")}
        assert await post_webhook(doomed, update) == 200
        await doomed.proc.wait()
        await answered_once(tg, "answered then killed", replicas)
        assert "reply already sent" in survivor.log.read_text()

        # The survivor's log says what it recovered, and that it ran on uvloop (event_loop =
        # "auto" with uvloop installed): these kills and recoveries happened on that loop.
        assert "turn run again after its process stopped" in survivor.log.read_text()
        assert "event_loop=uvloop" in survivor.log.read_text()
    finally:
        for replica in replicas:
            await replica.stop()


def signed(body: bytes, *, timestamp: int | None = None) -> dict[str, str]:
    ts = str(timestamp or int(time.time()))
    digest = hmac.new(SIGNING_SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256)
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest.hexdigest()}",
        "Content-Type": "application/json",
    }


async def post_slack(replica: Replica, event: dict[str, Any], retry: int = 0) -> int | None:
    body = json.dumps(event).encode()
    headers = signed(body)
    if retry:
        headers.update({"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_error"})
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{replica.url}/slack/events", data=body, headers=headers) as response,
        ):
            return response.status
    except (aiohttp.ClientError, ConnectionError):
        return None


async def test_slacks_retry_after_a_kill_is_answered_once(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str, fakes: tuple[FakeBotAPI, FakeSlack]
) -> None:
    tg, slack = fakes
    llm.responder = echo_slowly(set())
    env = replica_env(tg, slack, llm, redis_url)
    survivor = await start_replica("survivor", tmp_path, env)
    doomed = await start_replica("doomed", tmp_path, env, crash_at="after_intake")
    try:
        # `chatgate doctor` sees both replicas through their heartbeats.
        await asyncio.sleep(1.0)
        doctor = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.app.cli",
            "doctor",
            env={**env, "CHATGATE_DATA_DIR": str(tmp_path / "doctor")},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        report = (await asyncio.wait_for(doctor.communicate(), 60))[0].decode()
        assert "pass  replicas: 2 alive" in report, report
        event = {
            "type": "event_callback",
            "team_id": "T1",
            "event_id": "Ev-retry-1",
            "event": {
                "type": "message",
                "channel": "D1",
                "channel_type": "im",
                "user": "U1",
                "text": "slack after a kill",
                "ts": "1700000000.000100",
            },
        }
        assert await post_slack(doomed, event) is None  # died before acknowledging
        await doomed.proc.wait()
        assert await post_slack(survivor, event, retry=1) == 200  # Slack's retry
        posted = await slack.wait_for_post("echo: slack after a kill", seconds=20)
        assert posted["channel"] == "D1"
        await asyncio.sleep(float(LEASE_TTL) + 1.5)
        texts = [c["text"] for c in slack.calls_to("chat.postMessage")]
        assert texts.count("echo: slack after a kill") == 1, texts
    finally:
        await survivor.stop()
        await doomed.stop()


async def test_polling_never_confirms_an_update_it_did_not_store(
    tmp_path: Path, llm: ScriptedLLM, redis_server: RedisServer
) -> None:
    from tests.harness import configured_gateway, gateway_settings

    llm.responder = echo_slowly(set())
    async with FakeBotAPI() as tg:
        settings = gateway_settings(
            tmp_path,
            llm.url,
            redis_url=redis_server.url,
            telegram={"token": tg.token, "api_url": tg.url, "poll_timeout": 1},
            router={"lease_ttl": 2},
            scheduler={"enabled": False},
        )
        async with configured_gateway(settings) as app:
            adapter = app.outbox.adapter("telegram")
            await eventually(lambda: getattr(adapter, "polling", False), 15, "polling")
            redis_server.stop()
            update_id = tg.push_message("while the store is down")
            # The poller fetches it, cannot store it, and asks for it again and again.
            await eventually(
                lambda: sum(1 for p in tg.polls if update_id in p.returned) >= 2, 15, "refetch"
            )
            offsets = [int(p.params.get("offset") or 0) for p in tg.polls]
            assert max(offsets) <= update_id, offsets
            redis_server.start()
            await eventually(lambda: "echo: while the store is down" in tg.texts(), 30)
            assert tg.texts().count("echo: while the store is down") == 1
