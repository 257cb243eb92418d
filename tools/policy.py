"""The tool policy: which registered tools the model gets in a scope, decided in five layers.

Layers, each narrowing what the previous ones left: (1) global `tools.allow`/`tools.deny`;
(2) `tools.providers` for the LLM provider, then for "provider/model"; (3) the tool profile of
the chat (`tools.chat_profiles`) or, when the chat has none, of its platform
(`tools.platform_profiles`); (4) the turn's agent profile (`[profiles.<name>]`): the
`tools.profiles` rule it names as `tool_policy`, then its `toolsets` and `tools`;
(5) `tools.subagent` for sub-agents. In every layer a non-empty allow list keeps only what
it names, and deny wins over allow.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gateway.sdk import (
    ConfigError,
    ProfileSettings,
    ProfilesSettings,
    Settings,
    ToolRule,
    ToolScope,
    ToolSpec,
    ToolsSettings,
)
from tools.registry import ToolRegistry
from tools.toolsets import GROUP_PREFIX, WILDCARD, expand, known_groups

log = logging.getLogger(__name__)

# A profile named in config but missing at run time (validation should have stopped it).
_DENY_ALL = ToolRule(deny=[WILDCARD])
# In an agent profile's `toolsets`: whatever the other layers allow.
DEFAULT_TOOLSET = "default"


class ToolPolicyError(ConfigError):
    """The tool policy names tools, groups or profiles that do not exist."""


@dataclass(frozen=True)
class Layer:
    label: str  # e.g. "global", "provider openrouter", "profile readonly (chat slack:C1)"
    rule: ToolRule


class ToolPolicy:
    """A `ScopeFilter` for `ToolRegistry`: evaluated on every call, so it is never stale."""

    def __init__(self, settings: ToolsSettings, profiles: ProfilesSettings | None = None) -> None:
        self._settings = settings
        self._profiles = profiles or ProfilesSettings()

    def layers(self, scope: ToolScope) -> list[Layer]:
        s = self._settings
        layers = [Layer("global", ToolRule(allow=s.allow, deny=s.deny))]
        for key in (scope.provider, f"{scope.provider}/{scope.model}"):
            if key in s.providers:
                layers.append(Layer(f"provider {key}", s.providers[key]))
        chat = f"{scope.platform}:{scope.chat_id}"
        if chat in s.chat_profiles:
            name, where = s.chat_profiles[chat], f"chat {chat}"
        elif scope.platform in s.platform_profiles:
            name, where = s.platform_profiles[scope.platform], f"platform {scope.platform}"
        else:
            name = where = ""
        if name:
            rule = s.profiles.get(name)
            if rule is None:
                log.error("tool profile missing profile=%s for=%s; no tools allowed", name, where)
            layers.append(Layer(f"profile {name} ({where})", rule or _DENY_ALL))
        layers.extend(self._agent_profile_layers(scope.profile))
        if scope.is_subagent:
            layers.append(Layer("subagent", s.subagent))
        return layers

    def _agent_profile_layers(self, name: str) -> list[Layer]:
        profile = self._profiles.get(name) if name else None
        if profile is None:
            return []
        layers = []
        if profile.tool_policy:
            rule = self._settings.profiles.get(profile.tool_policy) or _DENY_ALL
            layers.append(Layer(f"agent profile {name} (tool_policy {profile.tool_policy})", rule))
        own = profile_rule(profile)
        if own is not None:
            layers.append(Layer(f"agent profile {name}", own))
        return layers

    def removed_by(self, scope: ToolScope, tools: Sequence[ToolSpec[Any]]) -> dict[str, str]:
        """For each tool the scope does not get, the label of the layer that removed it."""
        left = {tool.name for tool in tools}
        removed: dict[str, str] = {}
        for layer in self.layers(scope):
            kept = _apply(layer.rule, left, tools)
            removed.update(dict.fromkeys(left - kept, layer.label))
            left = kept
        return removed

    def __call__(self, scope: ToolScope, tools: Sequence[ToolSpec[Any]]) -> list[ToolSpec[Any]]:
        left = {tool.name for tool in tools}
        for layer in self.layers(scope):
            left = _apply(layer.rule, left, tools)
        return [tool for tool in tools if tool.name in left]


def profile_rule(profile: ProfileSettings) -> ToolRule | None:
    """An agent profile's `toolsets` and `tools` as one rule; None when they narrow nothing.
    `toolsets = ["default"]` narrows nothing, `toolsets = []` leaves no tools."""
    allow, deny = list(profile.tools.allow), list(profile.tools.deny)
    toolsets = profile.toolsets
    if toolsets is not None and DEFAULT_TOOLSET not in toolsets:
        if not toolsets and not allow:
            deny = [WILDCARD]
        allow = [GROUP_PREFIX + name for name in toolsets] + allow
    if not allow and not deny:
        return None
    return ToolRule(allow=allow, deny=deny)


def _apply(rule: ToolRule, left: set[str], tools: Sequence[ToolSpec[Any]]) -> set[str]:
    kept = left & expand(rule.allow, tools) if rule.allow else set(left)
    return kept - expand(rule.deny, tools)


def validate_policy(settings: Settings, registry: ToolRegistry) -> list[str]:
    """One line per unknown tool, group or profile named in `tools.*`; empty when all is well."""
    s = settings.tools
    tools = registry.all()
    names = {tool.name for tool in tools}
    groups = known_groups(tools, registry.declared_groups())
    problems: list[str] = []

    def check(where: str, rule: ToolRule) -> None:
        for field, entries in (("allow", rule.allow), ("deny", rule.deny)):
            for entry in entries:
                problem = _unknown(entry, names, groups)
                if problem:
                    problems.append(f"tools.{where}{field}: {problem}")

    check("", ToolRule(allow=s.allow, deny=s.deny))
    for key, rule in s.providers.items():
        check(f"providers.{_quote(key)}.", rule)
    for key, rule in s.profiles.items():
        check(f"profiles.{_quote(key)}.", rule)
    check("subagent.", s.subagent)
    # The default core set may name tools a build leaves out; a configured one must be right.
    for entry in s.core if "core" in s.model_fields_set else ():
        problem = _unknown(entry, names, groups)
        if problem:
            problems.append(f"tools.core: {problem}")
    known = ", ".join(sorted(s.profiles)) or "none defined"
    refs = [("platform_profiles", k, v) for k, v in s.platform_profiles.items()]
    refs += [("chat_profiles", k, v) for k, v in s.chat_profiles.items()]
    for table, key, profile in refs:
        if profile not in s.profiles:
            problems.append(
                f"tools.{table}.{_quote(key)}: unknown profile {profile!r} (profiles: {known})"
            )
    for name, agent_profile in settings.profiles.named.items():
        for group in agent_profile.toolsets or ():
            if group != DEFAULT_TOOLSET and group not in groups:
                problems.append(
                    f"profiles.{_quote(name)}.toolsets: unknown toolset {group!r}"
                    f"{_suggest(group, groups)}"
                )
        for field, entries in (
            ("allow", agent_profile.tools.allow),
            ("deny", agent_profile.tools.deny),
        ):
            for entry in entries:
                problem = _unknown(entry, names, groups)
                if problem:
                    problems.append(f"profiles.{_quote(name)}.tools.{field}: {problem}")
    for key in s.chat_profiles:
        platform, _, chat_id = key.partition(":")
        if not platform or not chat_id:
            problems.append(
                f"tools.chat_profiles.{_quote(key)}: a chat is written 'platform:chat_id', "
                "e.g. 'slack:C0123'"
            )
    return problems


def check_policy(settings: Settings, registry: ToolRegistry) -> None:
    """Raise ToolPolicyError listing every problem `validate_policy` finds."""
    problems = validate_policy(settings, registry)
    if problems:
        raise ToolPolicyError(problems)


def _unknown(entry: str, names: set[str], groups: set[str]) -> str | None:
    if entry == WILDCARD or entry in names:
        return None
    if entry.startswith(GROUP_PREFIX):
        group = entry.removeprefix(GROUP_PREFIX)
        if group in groups:
            return None
        return f"unknown group {entry!r}{_suggest(group, groups, GROUP_PREFIX)}"
    if entry in groups:
        return f"unknown tool {entry!r} (did you mean 'group:{entry}'?)"
    return f"unknown tool {entry!r}{_suggest(entry, names)}"


def _suggest(word: str, choices: set[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    return f" (did you mean {prefix + close[0]!r}?)" if close else ""


def _quote(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else f'"{key}"'
