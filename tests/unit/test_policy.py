"""The tool policy, table-driven: each layer narrows the last, deny wins, groups and `*` expand,
and every unknown name in the config is reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from gateway.config import ConfigError, Settings, ToolsSettings
from gateway.sdk.tooling import ToolContext, ToolScope, ToolSpec
from tools.policy import ToolPolicy, ToolPolicyError, check_policy, validate_policy
from tools.registry import ToolRegistry
from tools.toolsets import describe_groups


class NoArgs(BaseModel):
    pass


async def _noop(args: NoArgs, ctx: ToolContext) -> str:
    return ""


GROUPS = {
    "read_file": "fs", "write_file": "fs", "edit_file": "fs", "shell": "runtime",
    "web_fetch": "web", "web_search": "web", "memory": "memory", "todo": "session",
    "clarify": "session",
}  # fmt: skip
ALL = set(GROUPS)
FS = {"read_file", "write_file", "edit_file"}
WEB = {"web_fetch", "web_search"}
SESSION = {"todo", "clarify", "read_channel"}


def registry() -> ToolRegistry:
    return ToolRegistry(
        ToolSpec(name=name, description="", args=NoArgs, handler=_noop, group=group)
        for name, group in GROUPS.items()
    )


def scope(
    platform: str = "telegram",
    chat: str = "1",
    provider: str = "ollama",
    model: str = "qwen",
    subagent: bool = False,
) -> ToolScope:
    return ToolScope(platform, chat, provider, model, is_subagent=subagent)


READONLY = {"allow": ["read_file", "group:web"]}

# fmt: off
CASES: list[tuple[str, dict[str, Any], ToolScope, set[str]]] = [
    # (1) global
    ("nothing configured: everything", {}, scope(), ALL),
    ("allow one tool", {"allow": ["read_file"]}, scope(), {"read_file"}),
    ("deny one tool", {"deny": ["shell"]}, scope(), ALL - {"shell"}),
    ("allow a group minus a tool", {"allow": ["group:fs"], "deny": ["edit_file"]}, scope(),
     FS - {"edit_file"}),
    ("core is fs + runtime + web", {"allow": ["group:core"]}, scope(), FS | {"shell"} | WEB),
    ("wildcard allow, group deny", {"allow": ["*"], "deny": ["group:web"]}, scope(), ALL - WEB),
    ("deny everything", {"deny": ["*"]}, scope(), set()),
    ("deny wins over allow", {"allow": ["read_file", "shell"], "deny": ["shell"]}, scope(),
     {"read_file"}),
    ("an empty group allows nothing", {"allow": ["group:cron"]}, scope(), set()),
    # (2) provider and model
    ("provider rule applies", {"providers": {"openrouter": {"deny": ["shell"]}}},
     scope(provider="openrouter"), ALL - {"shell"}),
    ("provider rule only for that provider", {"providers": {"openrouter": {"deny": ["shell"]}}},
     scope(provider="ollama"), ALL),
    ("model rule", {"providers": {"openrouter/tiny": {"allow": ["group:fs"]}}},
     scope(provider="openrouter", model="tiny"), FS),
    ("model rule only for that model", {"providers": {"openrouter/tiny": {"allow": ["group:fs"]}}},
     scope(provider="openrouter", model="big"), ALL),
    ("provider then model both narrow",
     {"providers": {"p": {"deny": ["shell"]}, "p/m": {"allow": ["shell", "memory"]}}},
     scope(provider="p", model="m"), {"memory"}),
    ("a model name with a slash", {"providers": {"openrouter/meta/llama-3": {"deny": ["*"]}}},
     scope(provider="openrouter", model="meta/llama-3"), set()),
    ("provider cannot grant back", {"deny": ["shell"], "providers": {"p": {"allow": ["shell"]}}},
     scope(provider="p"), set()),
    # (3) platform and chat profiles
    ("platform profile", {"profiles": {"readonly": READONLY},
                          "platform_profiles": {"discord": "readonly"}},
     scope(platform="discord"), {"read_file"} | WEB),
    ("platform profile elsewhere", {"profiles": {"readonly": READONLY},
                                    "platform_profiles": {"discord": "readonly"}},
     scope(platform="slack"), ALL),
    ("chat profile",
     {"profiles": {"readonly": READONLY}, "chat_profiles": {"slack:C1": "readonly"}},
     scope(platform="slack", chat="C1"), {"read_file"} | WEB),
    ("chat profile only that chat",
     {"profiles": {"readonly": READONLY}, "chat_profiles": {"slack:C1": "readonly"}},
     scope(platform="slack", chat="C2"), ALL),
    ("chat profile beats platform profile",
     {"profiles": {"readonly": READONLY, "full": {}}, "platform_profiles": {"discord": "readonly"},
      "chat_profiles": {"discord:ops": "full"}},
     scope(platform="discord", chat="ops"), ALL),
    ("profile deny", {"profiles": {"quiet": {"deny": ["group:session", "shell"]}},
                      "platform_profiles": {"telegram": "quiet"}},
     scope(), ALL - SESSION - {"shell"}),
    ("profile cannot grant what global removed",
     {"deny": ["web_fetch"], "profiles": {"readonly": READONLY},
      "platform_profiles": {"telegram": "readonly"}},
     scope(), {"read_file", "web_search"}),
    ("profile cannot grant what the provider removed",
     {"providers": {"p": {"allow": ["memory"]}}, "profiles": {"readonly": READONLY},
      "platform_profiles": {"telegram": "readonly"}},
     scope(provider="p"), set()),
    # (4) sub-agents
    ("subagent rule", {"subagent": {"deny": ["group:session", "group:subagent"]}},
     scope(subagent=True), ALL - SESSION),
    ("subagent rule not for the main agent", {"subagent": {"deny": ["group:session"]}},
     scope(), ALL),
    ("subagent narrows the profile",
     {"profiles": {"readonly": READONLY}, "platform_profiles": {"telegram": "readonly"},
      "subagent": {"allow": ["web_fetch", "shell"]}},
     scope(subagent=True), {"web_fetch"}),
]
# fmt: on


@pytest.mark.parametrize(
    ("config", "where", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_policy_layers(config: dict[str, Any], where: ToolScope, expected: set[str]) -> None:
    reg = registry()
    settings = Settings(tools=config)
    assert validate_policy(settings, reg) == []
    reg.set_filter(ToolPolicy(settings.tools))
    assert {tool.name for tool in reg.for_scope(where)} == expected


def test_removed_by_names_the_layer() -> None:
    tools = ToolsSettings(
        deny=["shell"],
        providers={"p": {"deny": ["memory"]}},
        profiles={"readonly": READONLY},
        chat_profiles={"slack:C1": "readonly"},
        subagent={"deny": ["web_search"]},
    )
    policy = ToolPolicy(tools)
    where = scope(platform="slack", chat="C1", provider="p", subagent=True)
    assert [layer.label for layer in policy.layers(where)] == [
        "global",
        "provider p",
        "profile readonly (chat slack:C1)",
        "subagent",
    ]
    removed = policy.removed_by(where, registry().all())
    assert removed["shell"] == "global"
    assert removed["memory"] == "provider p"
    assert removed["todo"] == "profile readonly (chat slack:C1)"
    assert removed["web_search"] == "subagent"
    assert set(removed) == ALL - {"read_file", "web_fetch"}


def test_a_missing_profile_fails_closed() -> None:
    tools = ToolsSettings.model_construct(
        **{**ToolsSettings().__dict__, "platform_profiles": {"telegram": "ghost"}}
    )
    assert ToolPolicy(tools)(scope(), registry().all()) == []


# fmt: off
PROBLEMS: list[tuple[dict[str, Any], list[str]]] = [
    ({"allow": ["read_fle"]}, ["tools.allow: unknown tool 'read_fle' (did you mean 'read_file'?)"]),
    ({"deny": ["group:webb"]},
     ["tools.deny: unknown group 'group:webb' (did you mean 'group:web'?)"]),
    ({"deny": ["fs"]}, ["tools.deny: unknown tool 'fs' (did you mean 'group:fs'?)"]),
    ({"allow": ["frobnicate"]}, ["tools.allow: unknown tool 'frobnicate'"]),
    ({"providers": {"openrouter/x": {"deny": ["nope"]}}},
     ["tools.providers.\"openrouter/x\".deny: unknown tool 'nope'"]),
    ({"profiles": {"ro": {"allow": ["group:nothing"]}}},
     ["tools.profiles.ro.allow: unknown group 'group:nothing'"]),
    ({"subagent": {"deny": ["spawn"]}}, ["tools.subagent.deny: unknown tool 'spawn'"]),
    ({"platform_profiles": {"discord": "readonly"}},
     ["tools.platform_profiles.discord: unknown profile 'readonly' (profiles: none defined)"]),
    ({"profiles": {"ro": {}}, "chat_profiles": {"slack:C1": "rw"}},
     ["tools.chat_profiles.\"slack:C1\": unknown profile 'rw' (profiles: ro)"]),
    ({"profiles": {"ro": {}}, "chat_profiles": {"C1": "ro"}},
     ["tools.chat_profiles.C1: a chat is written 'platform:chat_id', e.g. 'slack:C0123'"]),
    # Declared groups are known even while empty; '*' is always fine.
    ({"allow": ["group:cron", "group:skills", "group:subagent", "group:core", "*"]}, []),
]
# fmt: on


@pytest.mark.parametrize(("config", "problems"), PROBLEMS)
def test_unknown_names_are_reported(config: dict[str, Any], problems: list[str]) -> None:
    assert validate_policy(Settings(tools=config), registry()) == problems


def test_check_policy_raises_a_config_error_listing_all_problems() -> None:
    settings = Settings(tools={"allow": ["nope"], "deny": ["group:zzz"]})
    with pytest.raises(ToolPolicyError) as err:
        check_policy(settings, registry())
    assert isinstance(err.value, ConfigError)
    assert len(err.value.problems) == 2
    assert "'nope'" in str(err.value) and "'group:zzz'" in str(err.value)


async def test_install_policy_refuses_an_unknown_name(tmp_path: Path) -> None:
    from gateway.app.tool_wiring import (
        ToolServices,
        builtin_families,
        install_policy,
        register_families,
    )
    from gateway.sdk.channels import Outbox
    from gateway.sdk.extensions import Extensions
    from gateway.store.embedded import EmbeddedStore
    from gateway.turn.memory import MemoryBook

    settings = Settings(data_dir=tmp_path, tools={"profiles": {"ro": {"allow": ["read_fil"]}}})
    store = EmbeddedStore(tmp_path / "store")
    services = ToolServices(
        settings,
        store,
        MemoryBook(store, settings.memory),
        Outbox(),
        Extensions(),
    )
    registry = ToolRegistry()
    families = builtin_families(services, registry)
    register_families(registry, services.extensions, families)
    with pytest.raises(ToolPolicyError, match=r"tools.profiles.ro.allow: unknown tool 'read_fil'"):
        install_policy(registry, settings)
    for family in reversed(families):
        await family.close()
    await store.close()


def test_groups_listing() -> None:
    rows = {group: members for group, members, _about in describe_groups(registry().all())}
    assert rows["group:fs"] == sorted(FS)
    assert rows["group:core"] == sorted(FS | {"shell"} | WEB)
    assert rows["group:cron"] == [] and rows["group:subagent"] == []
    assert list(rows)[-1] == "group:core"
