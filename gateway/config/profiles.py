"""`[profiles.<name>]` (persona, model and fallback chain, tools, limits for a kind of chat)
and the `[[profiles.bind]]` rules that say where each applies.

Not to be confused with `tools.profiles`, which are named allow/deny rules of the tool
policy; an agent profile may name one of those as its `tool_policy`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, SerializationInfo, field_validator, model_serializer, model_validator

from gateway.config.base import DAY, Section, ToolRule, relative_to_config

# Keys of [profiles] that are not profile names.
_RESERVED = ("bind", "allow_model_switch")
DEFAULT_PROFILE = "default"


class ProfileSettings(Section):
    description: str = ""
    # Instructions added to the built-in prompt in place of agent.system_prompt; or read from a
    # file (a relative path is relative to the config file's folder). Read at start.
    system_prompt: str = ""
    system_prompt_file: Path | None = None
    provider: str = ""  # a provider name ("default" is [llm]); empty: "default"
    model: str = ""  # empty: the provider's model
    # Tried in order when the model fails in a way retrying will not fix soon:
    # provider names (their default model) or "provider/model".
    fallback: list[str] = []
    # What /model may switch a conversation to here; empty: the model and its fallbacks.
    models: list[str] = []
    # Tools: toolset names (`chatgate tools groups`; "default" = no narrowing, [] = no
    # tools), a `tools.profiles` rule by name, and an allow/deny rule of its own. Each
    # narrows what the global, provider and chat layers of the tool policy left.
    toolsets: list[str] | None = None
    tool_policy: str = ""
    tools: ToolRule = ToolRule()
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0, le=1_000_000)  # per completion
    max_iterations: int | None = Field(default=None, ge=1, le=10_000)
    max_turn_seconds: float | None = Field(default=None, gt=0, le=DAY)
    max_tokens_per_turn: int | None = Field(default=None, ge=1000, le=1_000_000_000)
    stream: bool | None = None  # stream completions (None: the provider's `stream`)
    reply_to_message: bool = True  # answer as a reply to the person's message

    @field_validator("system_prompt_file")
    @classmethod
    def _beside_config(cls, value: Path | None) -> Path | None:
        return None if value is None else relative_to_config(value)

    @model_validator(mode="after")
    def _one_prompt(self) -> ProfileSettings:
        if self.system_prompt and self.system_prompt_file is not None:
            raise ValueError("set system_prompt or system_prompt_file, not both")
        return self


class ProfileBinding(Section):
    """Where a profile applies. Each key that is set must match; a rule with `user` beats
    one with `thread`, which beats `chat`, which beats `platform` (then file order)."""

    profile: str
    platform: str = ""
    chat: str = ""  # the platform's chat id (Telegram -100..., Slack C0123, Discord channel)
    thread: str = ""  # a thread or forum topic id
    user: str = ""  # a person's id on the platform

    @model_validator(mode="after")
    def _matches_something(self) -> ProfileBinding:
        if not (self.platform or self.chat or self.thread or self.user):
            raise ValueError(
                "a binding needs platform, chat, thread or user; "
                "for every other chat define [profiles.default]"
            )
        return self

    @property
    def specificity(self) -> int:
        return (
            8 * bool(self.user) + 4 * bool(self.thread) + 2 * bool(self.chat) + bool(self.platform)
        )

    def describe(self) -> str:
        parts = [
            f"{key} = {value!r}"
            for key, value in (
                ("platform", self.platform),
                ("chat", self.chat),
                ("thread", self.thread),
                ("user", self.user),
            )
            if value
        ]
        return ", ".join(parts)


class ProfilesSettings(Section):
    """`[profiles]`: named profiles as sub-tables, plus `bind` rules and `allow_model_switch`."""

    # Keys other than these are profile names (gateway/config/env.py reads env names so too).
    FREE_KEYS: ClassVar[str] = "named"

    allow_model_switch: bool = False  # anyone (not only admins) may use /model
    bind: list[ProfileBinding] = []
    named: dict[str, ProfileSettings] = {}

    @model_validator(mode="before")
    @classmethod
    def _split_names(cls, data: Any) -> Any:
        # `[profiles.coding]` sits beside `bind`; gather the tables into `named`.
        if not isinstance(data, dict) or "named" in data:
            return data
        named = {k: v for k, v in data.items() if k not in _RESERVED}
        return {**{k: data[k] for k in _RESERVED if k in data}, "named": named}

    @model_serializer(mode="wrap")
    def _flat(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        named = data.pop("named", {})
        return {**data, **named}

    def get(self, name: str) -> ProfileSettings | None:
        return self.named.get(name)


def split_model_ref(ref: str) -> tuple[str, str]:
    """("provider", "model") of "provider/model"; ("provider", "") of a bare provider name.
    Model names may hold slashes themselves ("openrouter/anthropic/claude-sonnet-4.5")."""
    provider, _, model = ref.strip().partition("/")
    return provider, model


def profile_problems(
    profiles: ProfilesSettings, providers: list[str], tool_profiles: list[str]
) -> list[str]:
    """One line per reference that names nothing: profiles in bindings, providers in chains,
    tool-policy rules; and prompt files that cannot be read."""
    problems: list[str] = []
    known = ", ".join(sorted(profiles.named)) or "none defined"
    for index, rule in enumerate(profiles.bind):
        if rule.profile not in profiles.named:
            problems.append(
                f"profiles.bind[{index}].profile: unknown profile {rule.profile!r} "
                f"(profiles: {known})"
            )
    provider_list = ", ".join(providers)
    for name, profile in profiles.named.items():
        where = f"profiles.{name}"
        if profile.provider and profile.provider not in providers:
            problems.append(
                f"{where}.provider: unknown provider {profile.provider!r} "
                f"(providers: {provider_list})"
            )
        for field, refs in (("fallback", profile.fallback), ("models", profile.models)):
            for ref in refs:
                provider, _ = split_model_ref(ref)
                if provider not in providers:
                    problems.append(
                        f"{where}.{field}: {ref!r} names no provider "
                        f"(write a provider name or 'provider/model'; providers: {provider_list})"
                    )
        if profile.tool_policy and profile.tool_policy not in tool_profiles:
            have = ", ".join(sorted(tool_profiles)) or "none defined"
            problems.append(
                f"{where}.tool_policy: unknown tools.profiles rule {profile.tool_policy!r} "
                f"(defined: {have})"
            )
        path = profile.system_prompt_file
        if path is not None and not path.is_file():
            problems.append(f"{where}.system_prompt_file: {path} is not a readable file")
    return problems
