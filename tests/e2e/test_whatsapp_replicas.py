"""WhatsApp webhooks over `chatgate run` replicas on one Redis: a replica killed after it stored
a message, or in the middle of answering it, loses nothing; the message is answered once."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.whatsapp import FakeWhatsApp, signature
from tests.harness import eventually
from tests.replicas import Replica, base_env, start_replica

pytestmark = pytest.mark.e2e

LEASE_TTL = "1.5"
ANA = "15551230001"


def echo_slowly(slow_first: set[str]) -> Any:
    """Echo each message; the first answer to a text in `slow_first` takes 30 s (the test
    kills the replica meanwhile)."""

    async def respond(request: dict[str, Any]) -> Reply:
        text = last_user_text(request)
        if text in slow_first:
            slow_first.discard(text)
            return Reply.text(f"echo: {text}", delay=30)
        return Reply.text(f"echo: {text}")

    return respond


def replica_env(wa: FakeWhatsApp, llm: ScriptedLLM, redis_url: str) -> dict[str, str]:
    settings = {f"CHATGATE_WHATSAPP__{k.upper()}": str(v) for k, v in wa.settings().items()}
    return base_env(
        **settings,
        CHATGATE_REDIS__URL=redis_url,
        CHATGATE_REDIS__KEY_PREFIX=f"wa{uuid.uuid4().hex[:8]}",
        CHATGATE_LLM__BASE_URL=llm.url,
        CHATGATE_LLM__MODEL="fake-model",
        CHATGATE_LLM__STREAM="false",
        CHATGATE_ROUTER__LEASE_TTL=LEASE_TTL,
        CHATGATE_ROUTER__TYPING_DELAY="30",
        CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE="0",
        CHATGATE_SCHEDULER__ENABLED="false",
        CHATGATE_LOG_LEVEL="INFO",
    )


async def post(replica: Replica, body: dict[str, Any]) -> int | None:
    """Meta's POST to one replica; None when the replica died before answering."""
    raw = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "X-Hub-Signature-256": signature(raw)}
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{replica.url}/whatsapp/webhook", data=raw, headers=headers) as response,
        ):
            return response.status
    except (aiohttp.ClientError, ConnectionError):
        return None


def answers(wa: FakeWhatsApp, text: str) -> list[str]:
    return [s.text for s in wa.sent if s.text == f"echo: {text}"]


async def answered_once(wa: FakeWhatsApp, text: str, replicas: list[Replica]) -> None:
    try:
        await eventually(lambda: bool(answers(wa, text)), 20, f"an answer to {text!r}")
    except AssertionError:
        logs = "\n\n".join(f"== {r.name}\n{r.tail(30)}" for r in replicas)
        raise AssertionError(f"{text!r} was not answered\n{logs}") from None
    await asyncio.sleep(float(LEASE_TTL) + 1.5)  # time for a second answer, if one came
    assert answers(wa, text) == [f"echo: {text}"]


async def test_a_killed_replica_loses_no_whatsapp_message(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    slow: set[str] = set()
    llm.responder = echo_slowly(slow)
    async with FakeWhatsApp() as wa:
        env = replica_env(wa, llm, redis_url)
        survivor = await start_replica("survivor", tmp_path, env)
        replicas = [survivor]
        try:
            # 1. Killed right after storing: no 200, so Meta sends it again (to the
            #    survivor), which knows it already and answers it once.
            doomed = await start_replica("a", tmp_path, env, crash_at="after_intake")
            replicas.append(doomed)
            stored = wa.text("stored then killed", number=ANA)
            wa.last_inbound[ANA] = float(stored["timestamp"])
            wa.inbound_ids.add(stored["id"])
            body = wa.notification([stored])
            assert await post(doomed, body) is None
            await doomed.proc.wait()
            assert await post(survivor, body) == 200
            await answered_once(wa, "stored then killed", replicas)

            # 2. Acknowledged, then killed while the model answers: the survivor runs it.
            doomed = await start_replica("b", tmp_path, env)
            replicas.append(doomed)
            slow.add("killed mid-answer")
            asked = len(llm.requests)
            mid = wa.text("killed mid-answer", number=ANA)
            wa.inbound_ids.add(mid["id"])
            assert await post(doomed, wa.notification([mid])) == 200
            await eventually(lambda: len(llm.requests) > asked, 10, "the LLM call")
            doomed.kill()
            await answered_once(wa, "killed mid-answer", replicas)
            assert "turn run again after its process stopped" in survivor.log.read_text()
        finally:
            for replica in replicas:
                await replica.stop()
