"""The configured profiles and their bindings: which profile applies to a message, and why.

Precedence: a rule that names a `user` beats one naming a `thread`, which beats `chat`,
which beats `platform` (a rule's weight is the sum: user 8, thread 4, chat 2, platform 1);
among equal weights the first rule in the file wins. No rule matching means the profile
named "default" when one is defined, else the global settings (`[llm]`, `agent.*`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import ConfigError, Settings
from gateway.config.profiles import DEFAULT_PROFILE, ProfileBinding, ProfileSettings
from gateway.sdk.messages import ChatRef, UserRef

_BUILT_IN = ProfileSettings()


@dataclass(frozen=True)
class Resolution:
    name: str  # "default" when no rule matched
    profile: ProfileSettings
    why: str  # one line: the rule that matched, or why none did
    rule: int | None = None  # index in profiles.bind


class ProfileBook:
    """Built once at start; reads every profile's prompt file then (ConfigError if missing)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings.profiles
        self._global_prompt = settings.agent.system_prompt
        self._prompts: dict[str, str] = {}
        for name, profile in self._settings.named.items():
            self._prompts[name] = _prompt_of(name, profile, self._global_prompt)
        # Most specific first; `sorted` is stable, so file order breaks ties.
        self._rules = sorted(enumerate(self._settings.bind), key=lambda pair: -pair[1].specificity)

    @property
    def allow_model_switch(self) -> bool:
        return self._settings.allow_model_switch

    @property
    def names(self) -> list[str]:
        return list(self._settings.named)

    @property
    def bindings(self) -> list[ProfileBinding]:
        return list(self._settings.bind)

    def resolve(self, chat: ChatRef, user: UserRef, wanted: str | None = None) -> Resolution:
        if wanted is not None and wanted in self._settings.named:
            # Asked for by name (the API's model name, which the operator mapped to it).
            return Resolution(wanted, self._settings.named[wanted], f"asked for by name ({wanted})")
        for index, rule in self._rules:
            if matches(rule, chat, user):
                profile = self._settings.named[rule.profile]
                return Resolution(
                    rule.profile, profile, f"profiles.bind[{index}] ({rule.describe()})", index
                )
        default = self._settings.named.get(DEFAULT_PROFILE)
        if default is not None:
            return Resolution(DEFAULT_PROFILE, default, "no binding matches; [profiles.default]")
        return Resolution(
            DEFAULT_PROFILE, _BUILT_IN, "no binding matches and there is no [profiles.default]"
        )

    def prompt(self, resolution: Resolution) -> str:
        """The instructions added to the built-in prompt for this profile."""
        return self._prompts.get(resolution.name, self._global_prompt)

    def shadowed(self) -> list[str]:
        """One line per rule that can never apply: an earlier rule of the same weight
        matches exactly the same messages."""
        problems: list[str] = []
        seen: dict[tuple[str, str, str, str], int] = {}
        for index, rule in enumerate(self._settings.bind):
            where = (rule.platform, rule.chat, rule.thread, rule.user)
            if where in seen:
                problems.append(
                    f"profiles.bind[{index}] never applies: profiles.bind[{seen[where]}] "
                    f"matches the same ({rule.describe()})"
                )
            else:
                seen[where] = index
        return problems


def matches(rule: ProfileBinding, chat: ChatRef, user: UserRef) -> bool:
    return (
        (not rule.platform or rule.platform == chat.platform)
        and (not rule.chat or rule.chat == chat.chat_id)
        and (not rule.thread or rule.thread == (chat.thread_id or ""))
        and (not rule.user or rule.user == user.user_id)
    )


def _prompt_of(name: str, profile: ProfileSettings, fallback: str) -> str:
    path = profile.system_prompt_file
    if path is None:
        return profile.system_prompt or fallback
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            [f"profiles.{name}.system_prompt_file: cannot read {path} ({exc})"]
        ) from None
