"""A crowd at once (issue 20): 10,000 sessions each send one message to one process with a
small Redis connection pool; every message is stored, answered once, and none refused."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from gateway.admission import Status
from tests.harness import gateway_settings, running_gateway

pytestmark = pytest.mark.e2e

SESSIONS = 10_000


def instant_llm() -> httpx.MockTransport:
    """An OpenAI-compatible server that answers at once, in process (no HTTP hop)."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        text = body["messages"][-1]["content"]
        completion = {
            "id": "c",
            "object": "chat.completion",
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"re: {text}"},
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
        return httpx.Response(200, json=completion)

    return httpx.MockTransport(answer)


async def test_ten_thousand_sessions_at_once_are_all_answered(
    tmp_path: Path, redis_url: str
) -> None:
    settings = gateway_settings(
        tmp_path,
        "http://llm.invalid/v1",
        redis_url=redis_url,
        redis={"max_connections": 4},
        llm={"stream": False},
        router={"max_concurrent_turns": 64},
        scheduler={"enabled": False},
    )
    started = time.monotonic()
    async with running_gateway(settings, llm_transport=instant_llm()) as gw:
        submissions = await asyncio.gather(
            *(gw.submit(f"hello {n}", chat_id=f"c{n}") for n in range(SESSIONS))
        )
        statuses = {s.status for s in submissions}
        assert statuses <= {Status.STARTED, Status.QUEUED}, statuses
        outcomes = await asyncio.wait_for(asyncio.gather(*(s.done for s in submissions)), 300)
        drained = time.monotonic() - started
        assert all(o.ok for o in outcomes)
        replies = sorted(gw.texts)
        assert len(replies) == SESSIONS and len(set(replies)) == SESSIONS
        assert await gw.app.store.pending(str(submissions[0].session)) == []
    print(f"\n{SESSIONS} sessions drained in {drained:.1f} s")
