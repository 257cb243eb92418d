"""Fallback end to end: a failing provider (500s, a timeout, 401, a long 429) hands the turn
to the next model with a one-line note once; the breaker keeps it out, probes it, and lets
it back; tool-call format follows the model actually used."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from tests.fakes.llm import Reply, ScriptedLLM
from tests.harness import gateway_settings, running_gateway

COOLDOWN = 0.4


@pytest.fixture
async def primary() -> AsyncIterator[ScriptedLLM]:
    async with ScriptedLLM(models=("big-model",)) as server:
        yield server


def fallback_settings(
    tmp_path: Path, backup: ScriptedLLM, primary: ScriptedLLM, **router: Any
) -> Settings:
    return gateway_settings(
        tmp_path,
        backup.url,
        llm={
            "base_url": backup.url,
            "breaker_cooldown_seconds": COOLDOWN,
            "breaker_max_cooldown_seconds": COOLDOWN,
            "providers": {
                "router": {
                    "base_url": primary.url,
                    "model": "big-model",
                    "max_retries": 1,
                    **router,
                }
            },
        },
        profiles={
            "main": {"provider": "router", "fallback": ["default"]},
            "bind": [{"profile": "main", "platform": "console"}],
        },
    )


def note(reason: str) -> str:
    return (
        f"Note: router/big-model is not available ({reason}); default/fake-model is answering "
        "instead."
    )


async def test_server_errors_fall_back_with_one_note_and_the_breaker_cycle(
    tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM
) -> None:
    async with running_gateway(fallback_settings(tmp_path, llm, primary)) as gw:
        primary.push(Reply.error(500, "upstream down"), Reply.error(502, "bad gateway"))
        llm.push(Reply.call("todo", items=[]), Reply.text("Done on the backup."))
        outcome = await gw.say("plan my day")
        assert outcome.reply == "Done on the backup."
        assert gw.texts == [note("server error"), "Done on the backup."]  # once, two calls
        assert len(primary.requests) == 2 and len(llm.requests) == 2
        # The history the backup got is the turn's as it was.
        assert llm.requests[0]["messages"][-1]["content"] == "plan my day"

        # Held out: the next turn goes straight to the backup.
        await gw.say("again")
        assert len(primary.requests) == 2 and gw.texts[-2] == note("failing recently")

        # After the pause one probe goes out; it fails, and the breaker opens again.
        await asyncio.sleep(COOLDOWN + 0.1)
        primary.push(Reply.error(503, "still down"), Reply.error(503, "still down"))
        await gw.say("third")
        assert len(primary.requests) == 4
        await gw.say("fourth")
        assert len(primary.requests) == 4

        # The provider is back: after the pause the probe succeeds and it serves again.
        await asyncio.sleep(COOLDOWN + 0.1)
        sent = len(gw.texts)
        assert (await gw.say("fifth")).reply == "echo: fifth"
        assert len(primary.requests) == 5 and gw.texts[sent:] == ["echo: fifth"]
        await gw.say("sixth")
        assert len(primary.requests) == 6
        metrics = gw.app.metrics
        assert metrics.total("llm_fallbacks_total") == 4
        assert (
            metrics.counter(
                "llm_errors_total", provider="router", model="big-model", kind="server_error"
            )
            == 2
        )


async def test_a_timeout_falls_back(tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM) -> None:
    settings = fallback_settings(tmp_path, llm, primary, timeout=0.3, max_retries=0)
    async with running_gateway(settings) as gw:
        primary.push(Reply.text("too late", delay=2.0))
        assert (await gw.say("quick?")).reply == "echo: quick?"
        assert gw.texts[0] == note("timed out")


async def test_refused_credentials_fall_back_without_retrying(
    tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM
) -> None:
    async with running_gateway(fallback_settings(tmp_path, llm, primary)) as gw:
        primary.push(Reply.error(401, "invalid api key"))
        assert (await gw.say("hi")).reply == "echo: hi"
        assert gw.texts == [note("credentials refused"), "echo: hi"]
        assert len(primary.requests) == 1  # 401 is not retried


async def test_a_long_rate_limit_falls_back_at_once(
    tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM
) -> None:
    settings = fallback_settings(tmp_path, llm, primary, max_wait_seconds=5)
    async with running_gateway(settings) as gw:
        primary.push(Reply.error(429, "slow down", headers={"Retry-After": "120"}))
        assert (await gw.say("hi")).reply == "echo: hi"
        assert gw.texts[0] == note("rate limited") and len(primary.requests) == 1
        # The breaker keeps it out for as long as the server asked.
        breakers = gw.app.planner.breakers
        assert breakers.state("router") == "open"
        assert breakers.retry_at("router") - time.monotonic() > 100


async def test_errors_another_model_would_not_fix_are_reported(
    tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM
) -> None:
    async with running_gateway(fallback_settings(tmp_path, llm, primary)) as gw:
        primary.push(Reply.error(400, "context_length_exceeded: too many tokens"))
        outcome = await gw.say("a very long story")
        assert outcome.error is not None and "too long" in outcome.error
        assert not llm.requests


async def test_every_model_failing_reports_the_last_error(
    tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM
) -> None:
    async with running_gateway(fallback_settings(tmp_path, llm, primary)) as gw:
        primary.push(Reply.error(401, "bad key"))
        llm.push(*[Reply.error(500, "down")] * 3)  # [llm] retries twice in the tests
        outcome = await gw.say("anyone?")
        assert outcome.error == (
            "The AI model is not reachable right now; please try again in a few minutes."
        )


async def test_tool_call_format_follows_the_model_in_use(
    tmp_path: Path, llm: ScriptedLLM, primary: ScriptedLLM
) -> None:
    settings = gateway_settings(
        tmp_path,
        llm.url,
        llm={
            "base_url": llm.url,
            "tool_call_format": "text",
            "providers": {"router": {"base_url": primary.url, "model": "big-model"}},
        },
        profiles={
            "main": {"provider": "router", "fallback": ["default"]},
            "bind": [{"profile": "main", "platform": "console"}],
        },
    )
    async with running_gateway(settings) as gw:
        primary.push(Reply.error(401, "bad key"))
        await gw.say("hi")
        (request,) = llm.requests
        assert "tools" not in request  # the text format puts the tools in the prompt
        assert "todo" in request["messages"][0]["content"]
        assert "tools" in primary.requests[0]  # the native model got them natively
