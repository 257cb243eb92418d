"""Which profile applies where: precedence platform < chat < topic < user, file order on ties,
[profiles.default] when nothing matches, and the tool-policy layer a profile adds."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from gateway.config import Settings, load_settings
from gateway.profiles.book import ProfileBook
from gateway.sdk.messages import ChatKind, ChatRef, UserRef
from gateway.sdk.tooling import ToolContext, ToolScope, ToolSpec
from tools.policy import ToolPolicy, validate_policy
from tools.registry import ToolRegistry

RULES = [
    {"profile": "by_platform", "platform": "slack"},
    {"profile": "by_chat", "platform": "slack", "chat": "C1"},
    {"profile": "by_topic", "platform": "slack", "chat": "C1", "thread": "T9"},
    {"profile": "by_user", "platform": "slack", "user": "U7"},
]


def settings(**profiles: Any) -> Settings:
    named: dict[str, dict[str, object]] = {
        name: {} for name in ("by_platform", "by_chat", "by_topic", "by_user")
    }
    return load_settings(None, profiles={**named, "bind": RULES, **profiles})


def chat(chat_id: str = "C1", thread: str | None = None, platform: str = "slack") -> ChatRef:
    return ChatRef(platform=platform, chat_id=chat_id, thread_id=thread, kind=ChatKind.GROUP)


def user(user_id: str = "U1", platform: str = "slack") -> UserRef:
    return UserRef(platform=platform, user_id=user_id)


@pytest.mark.parametrize(
    ("where", "who", "expected"),
    [
        (chat("C2"), user(), "by_platform"),
        (chat("C1"), user(), "by_chat"),
        (chat("C1", "T9"), user(), "by_topic"),
        (chat("C1", "T8"), user(), "by_chat"),
        (chat("C1", "T9"), user("U7"), "by_user"),  # a person's rule beats even the topic's
        (chat("C2"), user("U7"), "by_user"),
    ],
)
def test_the_most_specific_rule_wins(where: ChatRef, who: UserRef, expected: str) -> None:
    resolution = ProfileBook(settings()).resolve(where, who)
    assert resolution.name == expected
    assert resolution.why.startswith(f"profiles.bind[{resolution.rule}]")


def test_no_match_gives_the_default_profile_or_the_global_settings() -> None:
    telegram = chat("-100", platform="telegram")
    someone = user(platform="telegram")
    plain = ProfileBook(settings()).resolve(telegram, someone)
    assert plain.name == "default" and "no [profiles.default]" in plain.why
    with_default = settings(default={"system_prompt": "Be brief."})
    book = ProfileBook(with_default)
    found = book.resolve(telegram, someone)
    assert found.name == "default" and book.prompt(found) == "Be brief."


def test_equal_rules_keep_file_order_and_doctor_flags_the_hidden_one() -> None:
    rules = [
        {"profile": "by_chat", "platform": "slack", "chat": "C5"},
        {"profile": "by_platform", "platform": "slack", "chat": "C5"},
    ]
    book = ProfileBook(settings(bind=rules))
    assert book.resolve(chat("C5"), user()).name == "by_chat"
    (problem,) = book.shadowed()
    assert problem.startswith("profiles.bind[1] never applies: profiles.bind[0]")


def test_prompts_come_from_the_profile_file_or_fall_back_to_agent_prompt(tmp_path: Any) -> None:
    prompt = tmp_path / "family.md"
    prompt.write_text("Keep it friendly.", encoding="utf-8")
    s = load_settings(
        None,
        agent={"system_prompt": "Global words."},
        profiles={"family": {"system_prompt_file": str(prompt)}, "plain": {}},
    )
    book = ProfileBook(s)
    family = book.resolve(chat(), user())  # no bindings: the built-in default
    assert book.prompt(family) == "Global words."
    from gateway.profiles.book import Resolution

    assert book.prompt(Resolution("family", s.profiles.named["family"], "")) == "Keep it friendly."
    assert book.prompt(Resolution("plain", s.profiles.named["plain"], "")) == "Global words."


# -- the tool policy layer ----------------------------------------------------------------


class _NoArgs(BaseModel):
    pass


async def _noop(args: _NoArgs, ctx: ToolContext) -> str:
    return "ok"


TOOLS = [
    ToolSpec("read_file", "", _NoArgs, _noop, group="fs"),
    ToolSpec("shell", "", _NoArgs, _noop, group="runtime"),
    ToolSpec("web_fetch", "", _NoArgs, _noop, group="web"),
]


def allowed(s: Settings, profile: str) -> list[str]:
    scope = ToolScope("slack", "C1", "p", "m", profile=profile)
    return [t.name for t in ToolPolicy(s.tools, s.profiles)(scope, TOOLS)]


def test_profile_toolsets_and_rules_narrow_the_policy() -> None:
    s = load_settings(
        None,
        tools={"deny": ["web_fetch"], "profiles": {"readonly": {"allow": ["group:fs"]}}},
        profiles={
            "coding": {"toolsets": ["default"]},
            "family": {"toolsets": []},
            "ops": {"toolsets": ["runtime", "web"]},
            "reader": {"tool_policy": "readonly"},
            "noshell": {"tools": {"deny": ["shell"]}},
        },
    )
    assert allowed(s, "coding") == ["read_file", "shell"]  # global deny still applies
    assert allowed(s, "family") == []
    assert allowed(s, "ops") == ["shell"]
    assert allowed(s, "reader") == ["read_file"]
    assert allowed(s, "noshell") == ["read_file"]
    assert allowed(s, "") == ["read_file", "shell"]


def test_unknown_toolsets_in_profiles_are_reported() -> None:
    s = load_settings(None, profiles={"x": {"toolsets": ["runtme"], "tools": {"allow": ["shel"]}}})
    problems = validate_policy(s, ToolRegistry(TOOLS))
    assert "profiles.x.toolsets: unknown toolset 'runtme' (did you mean 'runtime'?)" in problems
    assert "profiles.x.tools.allow: unknown tool 'shel' (did you mean 'shell'?)" in problems
