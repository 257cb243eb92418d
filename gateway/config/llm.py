"""`[llm]` and `[llm.providers.<name>]`: the OpenAI-compatible servers, their models, prices
and abilities, and the circuit breaker that keeps a failing one out for a while."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.config.base import DAY, HOUR, MINUTE, WEEK, Section
from gateway.config.urls import check_url

_MAX_PRICE = 100_000.0  # USD per million tokens; far above any real price, catches a typo


class ModelSettings(Section):
    """What differs for one model of a provider (`[llm.providers.<name>.models."<model>"]`);
    unset keys take the provider's value."""

    tool_call_format: Literal["native", "text", "auto"] | None = None
    vision: Literal["auto", "on", "off"] | None = None
    price_in_per_mtok: float | None = Field(default=None, ge=0, le=_MAX_PRICE)
    price_out_per_mtok: float | None = Field(default=None, ge=0, le=_MAX_PRICE)


class ProviderSettings(Section):
    """One OpenAI-compatible server: `[llm]` is the provider "default", `[llm.providers.<name>]`
    the others (which take [llm]'s timeouts and retries unless they set their own)."""

    base_url: str = "http://localhost:11434/v1"
    api_key: SecretStr = SecretStr("")
    model: str = "qwen3:8b"
    # Provider name for the tool policy; empty means derived from the base_url host.
    provider: str = ""
    tool_call_format: Literal["native", "text", "auto"] = "auto"
    # Stream completions (SSE); a server that ignores it answers whole and still works.
    stream: bool = True
    temperature: float | None = Field(default=None, ge=0, le=2)  # the OpenAI API range
    max_tokens: int | None = Field(default=None, gt=0, le=1_000_000)  # per completion
    timeout: float = Field(default=120.0, gt=0, le=HOUR)  # seconds for one request (read)
    connect_timeout: float = Field(default=10.0, gt=0, le=5 * MINUTE)
    max_retries: int = Field(default=4, ge=0, le=20)
    retry_base_delay: float = Field(default=0.5, ge=0, le=MINUTE)
    retry_max_delay: float = Field(default=30.0, ge=0, le=HOUR)
    max_connections: int = Field(default=512, ge=1, le=100_000)
    # Sent with every request; each value counts as a secret (an API key under any header
    # name), as in an MCP server's headers: masked by `config show`, redacted from logs.
    extra_headers: dict[str, SecretStr] = {}
    # Images to the model as image parts: "auto" tries and, when the server refuses,
    # remembers it for the model (in memory) and falls back to vision_model or a note.
    vision: Literal["auto", "on", "off"] = "auto"
    vision_model: str = ""  # set: the vision_analyze tool asks this model (same server)
    # The longest Retry-After of a 429 that is waited out; a longer one moves the turn to the
    # next model of its fallback chain at once. None: retry_max_delay.
    max_wait_seconds: float | None = Field(default=None, ge=0, le=HOUR)
    # USD per million prompt / completion tokens, for the budgets.
    price_in_per_mtok: float = Field(default=0.0, ge=0, le=_MAX_PRICE)
    price_out_per_mtok: float = Field(default=0.0, ge=0, le=_MAX_PRICE)
    models: dict[str, ModelSettings] = {}  # per-model prices, vision, tool-call format

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value:
            raise ValueError("must start with http:// or https://")
        return check_url(value, ("http", "https")).rstrip("/")

    @property
    def provider_name(self) -> str:
        return self.provider or (urlsplit(self.base_url).hostname or "")

    @property
    def wait_cap(self) -> float:
        """The longest Retry-After worth waiting for."""
        return self.retry_max_delay if self.max_wait_seconds is None else self.max_wait_seconds

    def for_model(self, model: str) -> ProviderSettings:
        """These settings for another model of the same server, its own overrides applied."""
        update: dict[str, Any] = {"model": model}
        extra = self.models.get(model)
        if extra is not None:
            update |= {k: v for k, v in extra.model_dump().items() if v is not None}
        return self.model_copy(update=update)


# Settings a named provider takes from [llm] unless it sets them itself.
_INHERITED = (
    "stream",
    "timeout",
    "connect_timeout",
    "max_retries",
    "retry_base_delay",
    "retry_max_delay",
    "max_connections",
    "max_wait_seconds",
)
DEFAULT_PROVIDER = "default"


class LLMSettings(ProviderSettings):
    """`[llm]`: the provider "default", the other providers, and the circuit breaker."""

    providers: dict[str, ProviderSettings] = {}
    # A provider (or one of its models) whose calls fail after retries in a way retrying will
    # not fix soon is left out for this long, then probed with the next real request; each
    # failed probe doubles the pause, up to the maximum.
    breaker_failures: int = Field(default=1, ge=1, le=100)  # failures in a row that open it
    breaker_cooldown_seconds: float = Field(default=60.0, gt=0, le=DAY)
    breaker_max_cooldown_seconds: float = Field(default=900.0, gt=0, le=WEEK)

    @field_validator("providers")
    @classmethod
    def _provider_names(cls, value: dict[str, ProviderSettings]) -> dict[str, ProviderSettings]:
        for name in value:
            if name == DEFAULT_PROVIDER:
                raise ValueError("'default' is the [llm] section itself; use another name")
            if not name or "/" in name:
                raise ValueError(f"provider name {name!r}: use letters, digits, - and _")
        return value

    @model_validator(mode="after")
    def _inherit(self) -> LLMSettings:
        for name, provider in list(self.providers.items()):
            update = {
                key: getattr(self, key)
                for key in _INHERITED
                if key not in provider.model_fields_set and key in self.model_fields_set
            }
            if update:
                self.providers[name] = provider.model_copy(update=update)
        return self

    def provider_settings(self, name: str) -> ProviderSettings:
        """A provider's settings by name; KeyError when there is none of that name."""
        if name == DEFAULT_PROVIDER:
            return self
        return self.providers[name]

    @property
    def provider_names(self) -> list[str]:
        return [DEFAULT_PROVIDER, *self.providers]
