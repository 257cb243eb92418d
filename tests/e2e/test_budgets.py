"""Budgets end to end on two replicas sharing one redis-server: a person, a chat and a
scheduled job reach their limits (a warning at 80%, refusal at 100% with the reset time);
the totals equal the usage the fake server reported; `chatgate usage` prints them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from gateway.llm.fallback import estimate_usage
from gateway.llm.types import Completion, Usage
from gateway.scheduling.jobs import JobKind, RunStatus
from tests.e2e.test_cli import chatgate
from tests.fakes.llm import Reply, ScriptedLLM
from tests.harness import Harness, eventually, gateway_settings, running_gateway

pytestmark = pytest.mark.redis
FAST_SCHEDULER = {
    "leader_ttl": 1.0,
    "min_interval_seconds": 1.0,
    "misfire_grace_seconds": 3.0,
    "resync_seconds": 1.0,
}


def budget_settings(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str, prefix: str, **budgets: Any
) -> Settings:
    return gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        key_prefix=prefix,
        llm={"price_in_per_mtok": 1000.0, "price_out_per_mtok": 1000.0},
        budgets=budgets,
        scheduler=FAST_SCHEDULER,
    )


@contextlib.asynccontextmanager
async def two_replicas(settings: Settings) -> AsyncIterator[tuple[Harness, Harness]]:
    async with running_gateway(settings) as a, running_gateway(settings) as b:
        yield a, b


def costs(llm: ScriptedLLM, prompt: int = 30, completion: int = 10) -> None:
    """Every answer reports the same usage: 40 tokens, $0.04 at $1000 per million."""
    llm.responder = lambda request: Reply.text("ok", usage=(prompt, completion))


def all_texts(*gateways: Harness) -> list[str]:
    return [text for gw in gateways for text in gw.texts]


async def test_a_persons_daily_budget_across_replicas(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    settings = budget_settings(
        tmp_path, llm, redis_url, uuid.uuid4().hex[:8], per_user_daily_tokens=100
    )
    costs(llm)
    async with two_replicas(settings) as (a, b):
        assert (await a.say("one")).ok  # 40 of 100
        assert (await b.say("two")).ok  # 80: the warning, from replica b
        warning = "You have used 80% of your daily budget (80 of 100 tokens); it resets at"
        assert sum(t.startswith(warning) for t in all_texts(a, b)) == 1
        assert b.texts[-1].startswith(warning) and b.texts[-2] == "ok"
        assert (await a.say("three")).ok  # 120: over, and told so
        assert a.texts[-1].startswith("You have used your daily budget (120 of 100 tokens)")
        refused = await b.say("four")
        assert refused.error is not None and refused.error.startswith(
            "You have used your daily budget (120 of 100 tokens); new requests wait until it "
            "resets at "
        )
        assert " UTC (in " in refused.error
        assert b.texts[-1] == refused.error and len(llm.requests) == 3
        # Another person in the same chat is not limited by Alice's budget.
        assert (await a.say("hi", user_id="bob")).ok
        counted = a.app.metrics.total("budget_refusals_total") + b.app.metrics.total(
            "budget_refusals_total"
        )
        assert counted == 1


async def test_a_chats_daily_money_budget(tmp_path: Path, llm: ScriptedLLM, redis_url: str) -> None:
    settings = budget_settings(
        tmp_path, llm, redis_url, uuid.uuid4().hex[:8], per_chat_daily_usd=0.1
    )
    costs(llm)
    async with two_replicas(settings) as (a, b):
        await a.say("one", user_id="ana")  # $0.04
        await b.say("two", user_id="bob")  # $0.08: 80%
        assert b.texts[-1].startswith("This chat has used 80% of its daily budget ($0.08 of $0.10)")
        await a.say("three", user_id="cy")  # $0.12
        refused = await b.say("four", user_id="dee")
        assert refused.error is not None
        assert refused.error.startswith("This chat has used its daily budget ($0.12 of $0.10)")
        other = await a.say("elsewhere", chat_id="chat2")  # another chat is fine
        assert other.ok


async def test_a_scheduled_jobs_daily_budget(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    settings = budget_settings(
        tmp_path, llm, redis_url, uuid.uuid4().hex[:8], per_job_daily_tokens=100
    )
    costs(llm)
    async with two_replicas(settings) as (a, b):
        await eventually(lambda: a.app.scheduler.is_leader or b.app.scheduler.is_leader)
        job = await a.app.scheduler.create(
            kind=JobKind.AGENT,
            text="Summarise the night.",
            when="every 1s",
            chat=a.console.chat,
            user=a.console.user,
        )
        deadline = time.monotonic() + 15
        while RunStatus.TURN_FAILED not in [
            r.status for r in await a.app.scheduler.book.runs(job.id)
        ]:
            assert time.monotonic() < deadline, all_texts(a, b)
            await asyncio.sleep(0.05)
        await a.app.scheduler.remove(job.id, user=a.console.user, chat=a.console.chat)
        runs = await a.app.scheduler.book.runs(job.id)
        assert [r.status for r in runs[:4]] == [RunStatus.DELIVERED] * 3 + [RunStatus.TURN_FAILED]
        texts = all_texts(a, b)
        warning = "This scheduled job has used 80% of its daily budget (80 of 100 tokens)"
        limit = "This scheduled job has used its daily budget (120 of 100 tokens); new requests"
        assert sum(t.startswith(warning) for t in texts) == 1
        assert runs[3].error is not None and runs[3].error.startswith(limit)
        assert len(llm.requests) == 3  # the refused run never reached the model
        # The person who made the job still talks to the bot: only the job is limited.
        assert (await a.say("morning!")).ok


async def test_totals_equal_the_servers_usage_and_the_usage_command(
    tmp_path: Path,
    llm: ScriptedLLM,
    redis_url: str,
) -> None:
    prefix = uuid.uuid4().hex[:8]
    settings = budget_settings(tmp_path, llm, redis_url, prefix)
    reported = Usage()
    sizes = iter([(120, 7), (95, 31), (310, 2), (44, 44), (1000, 9)])

    def respond(request: dict[str, Any]) -> Reply:
        nonlocal reported
        prompt, completion = next(sizes)
        reported += Usage(prompt, completion)
        return Reply.text("ok", usage=(prompt, completion))

    llm.responder = respond
    async with two_replicas(settings) as (a, b):
        for n, gw in enumerate([a, b, a, b, a]):
            await gw.say(f"message {n}", user_id="ana" if n % 2 else "bob")
        assert reported == Usage(1569, 93)
        # Counters no limit reads reach the store within about a second (ledger.py).
        deadline = time.monotonic() + 5
        while True:
            usage = (await a.say("/usage", user_id="ana")).reply or ""
            if f"this chat: {reported.total_tokens:,} tokens" in usage:
                break
            assert time.monotonic() < deadline, usage
            await asyncio.sleep(0.2)
    assert "you: 214 tokens (139 in, 75 out), $0.214" in usage  # ana's (95, 31) + (44, 44)

    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env |= {
        "CHATGATE_REDIS__URL": redis_url,
        "CHATGATE_REDIS__KEY_PREFIX": prefix,
        "CHATGATE_DATA_DIR": str(tmp_path / "cli"),
    }
    code, out, err = await chatgate(env, "usage", "--by", "model", cwd=tmp_path)
    assert code == 0, err
    cost = (reported.prompt_tokens + reported.completion_tokens) * 1000 / 1_000_000
    assert f"default/fake-model  {1569:>12,}  {93:>12,}  {cost:>12,.4f}" in out
    code, out, err = await chatgate(env, "usage", "--by", "user", cwd=tmp_path)
    lines = out.splitlines()
    assert code == 0 and lines[1].split() == [
        "USER",
        "TOKENS",
        "IN",
        "TOKENS",
        "OUT",
        "COST",
        "USD",
    ]
    assert [line.split()[0] for line in lines[2:]] == ["console:bob", "console:ana", "TOTAL"]
    code, _, err = await chatgate(env, "usage", "--since", "yesterday", cwd=tmp_path)
    assert code == 2 and "YYYY-MM-DD" in err


async def test_usage_is_estimated_when_the_server_reports_none(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    settings = budget_settings(tmp_path, llm, redis_url, uuid.uuid4().hex[:8])
    body = (
        '{"id": "x", "object": "chat.completion", "model": "fake-model", "choices": '
        '[{"index": 0, "message": {"role": "assistant", "content": "no usage here"}, '
        '"finish_reason": "stop"}]}'
    )
    llm.push(Reply(raw_body=body))
    async with running_gateway(settings) as gw:
        await gw.say("count me")
        (request,) = llm.requests
        completion = Completion("no usage here", (), None, "stop", Usage())
        expected = estimate_usage(request["messages"], request.get("tools"), completion)
        usage = (await gw.say("/usage")).reply or ""
        assert f"you: {expected.total_tokens:,} tokens" in usage
        assert expected.prompt_tokens > 100  # the system prompt and tools were counted
