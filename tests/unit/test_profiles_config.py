"""Settings for providers, profiles, bindings, budgets and otel: the issue's names, checks
across sections, and [llm] kept working as the provider "default"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gateway.config import DEFAULT_PROVIDER, ConfigError, load_settings, masked

ISSUE_EXAMPLE = """
[llm.providers.local]
base_url = "http://127.0.0.1:11434/v1"
model = "qwen3:8b"
[llm.providers.openrouter]
base_url = "https://openrouter.ai/api/v1"
api_key = "sk-or-secret-value"
model = "anthropic/claude-sonnet-4.5"
price_in_per_mtok = 3.0
price_out_per_mtok = 15.0

[profiles.coding]
system_prompt_file = "prompts/coding.md"
provider = "openrouter"
fallback = ["local", "default"]
toolsets = ["default"]

[[profiles.bind]]
profile = "coding"
platform = "slack"
chat = "C0123"
"""


def write_config(tmp_path: Path, text: str) -> Path:
    (tmp_path / "prompts").mkdir(exist_ok=True)
    (tmp_path / "prompts" / "coding.md").write_text("You write careful code.", encoding="utf-8")
    path = tmp_path / "chatgate.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_issue_example_loads_with_its_names(tmp_path: Path) -> None:
    settings = load_settings(write_config(tmp_path, ISSUE_EXAMPLE))
    assert settings.llm.provider_names == [DEFAULT_PROVIDER, "local", "openrouter"]
    router = settings.llm.provider_settings("openrouter")
    assert router.model == "anthropic/claude-sonnet-4.5"
    assert (router.price_in_per_mtok, router.price_out_per_mtok) == (3.0, 15.0)
    coding = settings.profiles.named["coding"]
    assert coding.fallback == ["local", "default"] and coding.toolsets == ["default"]
    # The prompt file is found beside the config file, wherever the command runs.
    assert coding.system_prompt_file == tmp_path / "prompts" / "coding.md"
    (rule,) = settings.profiles.bind
    assert (rule.profile, rule.platform, rule.chat) == ("coding", "slack", "C0123")


def test_plain_llm_section_is_the_default_provider(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[llm]\nbase_url = "http://h:1/v1"\nmodel = "m1"\n')
    settings = load_settings(path)
    assert settings.llm.provider_settings("default").model == "m1"
    assert settings.llm.providers == {} and settings.profiles.named == {}


def test_named_providers_take_llm_retries_unless_they_set_their_own(tmp_path: Path) -> None:
    settings = load_settings(
        None,
        llm={
            "max_retries": 1,
            "timeout": 7.0,
            "providers": {"a": {"model": "x"}, "b": {"model": "y", "max_retries": 3}},
        },
    )
    assert settings.llm.providers["a"].max_retries == 1
    assert settings.llm.providers["a"].timeout == 7.0
    assert settings.llm.providers["b"].max_retries == 3


def test_env_overrides_reach_profiles_and_providers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHATGATE_PROFILES__CODING__TEMPERATURE", "0.1")
    monkeypatch.setenv("CHATGATE_LLM__PROVIDERS__LOCAL__MODEL", "llama3")
    settings = load_settings(write_config(tmp_path, ISSUE_EXAMPLE))
    assert settings.profiles.named["coding"].temperature == 0.1
    assert settings.profiles.named["coding"].provider == "openrouter"  # the file's, kept
    assert settings.llm.providers["local"].model == "llama3"


def test_config_show_masks_provider_keys_and_keeps_profile_layout(tmp_path: Path) -> None:
    shown = masked(load_settings(write_config(tmp_path, ISSUE_EXAMPLE)))
    text = json.dumps(shown)
    assert "sk-or-secret-value" not in text
    assert shown["llm"]["providers"]["openrouter"]["api_key"] == "********"
    assert shown["profiles"]["coding"]["provider"] == "openrouter"  # flat, as written
    assert shown["profiles"]["bind"][0]["chat"] == "C0123"


@pytest.mark.parametrize(
    ("profiles", "expected"),
    [
        (
            {"coding": {"provider": "nope"}},
            "profiles.coding.provider: unknown provider 'nope' (providers: default)",
        ),
        (
            {"coding": {"fallback": ["gone/model-x"]}},
            "profiles.coding.fallback: 'gone/model-x' names no provider",
        ),
        (
            {"coding": {}, "bind": [{"profile": "codign", "platform": "slack"}]},
            "profiles.bind[0].profile: unknown profile 'codign' (profiles: coding)",
        ),
        (
            {"coding": {"tool_policy": "readonly"}},
            "profiles.coding.tool_policy: unknown tools.profiles rule 'readonly'",
        ),
        (
            {"coding": {"system_prompt_file": "/nonexistent/prompt.md"}},
            "profiles.coding.system_prompt_file: /nonexistent/prompt.md is not a readable file",
        ),
        ({"coding": {"tempreature": 0.2}}, "profiles.coding.tempreature: unknown setting"),
        ({"bind": [{"profile": "x"}]}, "profiles.bind.0: Value error, a binding needs"),
    ],
)
def test_bad_references_are_reported_one_line_each(
    profiles: dict[str, object], expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, profiles=profiles)
    assert any(line.startswith(expected) for line in info.value.problems), info.value.problems


def test_default_is_reserved_for_the_llm_section() -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, llm={"providers": {"default": {"model": "m"}}})
    assert "the [llm] section itself" in info.value.problems[0]


def test_per_model_settings_override_the_provider() -> None:
    settings = load_settings(
        None,
        llm={
            "providers": {
                "or": {
                    "model": "a",
                    "price_in_per_mtok": 1.0,
                    "models": {"b": {"price_in_per_mtok": 5.0, "vision": "on"}},
                }
            }
        },
    )
    provider = settings.llm.providers["or"]
    b = provider.for_model("b")
    assert (b.model, b.price_in_per_mtok, b.vision) == ("b", 5.0, "on")
    assert provider.for_model("c").price_in_per_mtok == 1.0


def test_budgets_and_otel_defaults_and_checks() -> None:
    settings = load_settings(None)
    assert settings.budgets.per_user_daily_usd == 0 and settings.budgets.warn_at == 0.8
    assert settings.otel.endpoint == ""
    with pytest.raises(ConfigError) as info:
        load_settings(None, budgets={"timezone": "Mars/Base"}, otel={"endpoint": "localhost"})
    problems = "\n".join(info.value.problems)
    assert "budgets.timezone: Value error, unknown timezone" in problems
    assert "otel.endpoint: Value error, must start with http://" in problems


def test_the_readme_example_is_a_valid_config(tmp_path: Path) -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text(encoding="utf-8")
    marker = "A coding channel and a family chat on different models:\n\n```toml\n"
    example = readme.split(marker, 1)[1].split("```", 1)[0]
    settings = load_settings(write_config(tmp_path, example))
    from gateway.profiles.book import ProfileBook
    from gateway.sdk.messages import ChatRef, UserRef

    book = ProfileBook(settings)
    slack = book.resolve(
        ChatRef(platform="slack", chat_id="C0123"), UserRef(platform="slack", user_id="U1")
    )
    family = book.resolve(
        ChatRef(platform="telegram", chat_id="-1001234567890"),
        UserRef(platform="telegram", user_id="7"),
    )
    assert (slack.name, family.name) == ("coding", "family")
    assert family.profile.toolsets == [] and settings.budgets.per_job_daily_usd == 0.5


def test_env_names_of_profiles_are_checked_like_every_other(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from gateway.app.app import load_settings as load_with_platforms

    monkeypatch.setenv("CHATGATE_PROFILES__CODING__TEMPERATURE", "0.2")
    assert load_with_platforms(None).profiles.named["coding"].temperature == 0.2
    monkeypatch.setenv("CHATGATE_PROFILES__CODING__TEMPRATURE", "1")
    with pytest.raises(ConfigError) as info:
        load_with_platforms(None)
    assert info.value.problems == [
        "CHATGATE_PROFILES__CODING__TEMPRATURE: no such setting; "
        "did you mean CHATGATE_PROFILES__CODING__TEMPERATURE?"
    ]
