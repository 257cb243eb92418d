"""Profiles end to end: a coding chat and a family chat on different providers, models,
prompts and tools; /model switches kept across a restart; /profile says why."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.config import Settings
from tests.fakes.llm import Reply, ScriptedLLM
from tests.harness import gateway_settings, running_gateway

CODING = "You are the coding assistant of the dev channel."
FAMILY = "You are the family helper. Keep it short and kind."


@pytest.fixture
async def big() -> AsyncIterator[ScriptedLLM]:
    async with ScriptedLLM(models=("big-model",)) as server:
        yield server


def profile_settings(
    tmp_path: Path, small: ScriptedLLM, big: ScriptedLLM, **extra: Any
) -> Settings:
    prompt = tmp_path / "coding.md"
    prompt.write_text(CODING, encoding="utf-8")
    sections: dict[str, Any] = {
        "llm": {
            "base_url": small.url,
            "providers": {"router": {"base_url": big.url, "model": "big-model"}},
        },
        "profiles": {
            "coding": {
                "system_prompt_file": str(prompt),
                "provider": "router",
                "fallback": ["default"],
                "toolsets": ["default"],
            },
            "family": {
                "system_prompt": FAMILY,
                "model": "cheap-model",
                "toolsets": [],
                "temperature": 0.3,
            },
            "bind": [
                {"profile": "coding", "platform": "console", "chat": "dev"},
                {"profile": "family", "platform": "console", "chat": "family"},
            ],
        },
        "access": {"admins": ["console:alice"], "rate_limit_per_minute": 0},
    }
    sections.update(extra)
    return gateway_settings(tmp_path, small.url, **sections)


def system_of(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


async def test_each_chat_gets_its_profiles_model_prompt_and_tools(
    tmp_path: Path, llm: ScriptedLLM, big: ScriptedLLM
) -> None:
    async with running_gateway(profile_settings(tmp_path, llm, big)) as gw:
        assert (await gw.say("fix the build", chat_id="dev")).reply == "echo: fix the build"
        (coding,) = big.requests
        assert coding["model"] == "big-model" and CODING in system_of(coding)
        assert {t["function"]["name"] for t in coding["tools"]} >= {"read_file", "shell"}

        assert (await gw.say("what's for dinner?", chat_id="family")).ok
        family = llm.requests[-1]
        assert family["model"] == "cheap-model" and FAMILY in system_of(family)
        assert "tools" not in family and family["temperature"] == 0.3
        assert CODING not in system_of(family)

        await gw.say("hello", chat_id="elsewhere")
        other = llm.requests[-1]
        assert other["model"] == "fake-model" and "tools" in other
        assert FAMILY not in system_of(other) and CODING not in system_of(other)
        assert len(big.requests) == 1

        shown = (await gw.say("/profile", chat_id="dev")).reply or ""
        assert (
            "Profile: coding, because profiles.bind[0] (platform = 'console', chat = 'dev')"
            in shown
        )
        assert "router/big-model -> default/fake-model" in shown
        shown = (await gw.say("/profile", chat_id="elsewhere")).reply or ""
        assert shown.startswith("Profile: default, because no binding matches")


async def test_model_switch_is_kept_across_a_restart(
    tmp_path: Path, llm: ScriptedLLM, big: ScriptedLLM
) -> None:
    settings = profile_settings(tmp_path, llm, big)
    async with running_gateway(settings) as gw:
        listing = (await gw.say("/model", chat_id="dev")).reply or ""
        assert "1. router/big-model (in use)" in listing and "2. default/fake-model" in listing
        assert (await gw.say("/model 2", chat_id="dev")).reply == (
            "This conversation now uses default/fake-model."
        )
        await gw.say("first", chat_id="dev")
        assert llm.requests[-1]["model"] == "fake-model" and not big.requests
        refused = (await gw.say("/model local/llama", chat_id="dev")).reply or ""
        assert refused.startswith("'local/llama' is not one of the models here")

    async with running_gateway(settings) as gw:
        await gw.say("after the restart", chat_id="dev")
        assert llm.requests[-1]["model"] == "fake-model" and not big.requests
        listing = (await gw.say("/model", chat_id="dev")).reply or ""
        assert "2. default/fake-model (in use)" in listing
        assert (await gw.say("/model reset", chat_id="dev")).reply == (
            "Back to the profile's model: router/big-model."
        )
        await gw.say("and now", chat_id="dev")
        assert big.requests[-1]["model"] == "big-model"


async def test_only_admins_switch_unless_allowed(
    tmp_path: Path, llm: ScriptedLLM, big: ScriptedLLM
) -> None:
    settings = profile_settings(
        tmp_path, llm, big, access={"admins": [], "rate_limit_per_minute": 0}
    )
    async with running_gateway(settings) as gw:
        listing = (await gw.say("/model", chat_id="dev")).reply or ""
        assert listing.endswith("Only an admin can switch the model here.")
        assert (await gw.say("/model 2", chat_id="dev")).reply == (
            "Only an admin can switch the model here."
        )
    profiles = settings.profiles.model_dump()
    settings = profile_settings(
        tmp_path,
        llm,
        big,
        access={"admins": [], "rate_limit_per_minute": 0},
        profiles={**profiles, "allow_model_switch": True},
    )
    async with running_gateway(settings) as gw:
        assert (await gw.say("/model 2", chat_id="dev")).reply == (
            "This conversation now uses default/fake-model."
        )


async def test_subagents_use_the_turns_models(
    tmp_path: Path, llm: ScriptedLLM, big: ScriptedLLM
) -> None:
    async with running_gateway(profile_settings(tmp_path, llm, big)) as gw:
        big.push(
            Reply.call("delegate", task="list the files"),
            Reply.text("The sub-agent found nothing."),  # the sub-agent's answer
            Reply.text("Nothing there."),
        )
        assert (await gw.say("look around", chat_id="dev")).reply == "Nothing there."
        assert len(big.requests) == 3 and not llm.requests
        assert "sub-agent" in system_of(big.requests[1])
