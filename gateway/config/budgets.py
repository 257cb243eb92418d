"""`[budgets]` (spending and token limits per person, chat, scheduled job and in total) and
`[otel]` (OpenTelemetry traces)."""

from __future__ import annotations

from pydantic import Field, field_validator

from gateway.config.base import Section, known_timezone
from gateway.config.urls import check_url

_MAX_USD = 1_000_000_000.0  # far above any real budget: catches a typo, never a real limit
_MAX_TOKENS = 10**15


class BudgetSettings(Section):
    """Limits on what turns may spend; 0 means no limit. Days and months begin at midnight in
    `timezone`. Cost comes from the providers' `price_*_per_mtok` and the usage each server
    reports (estimated from the text when it reports none)."""

    per_user_daily_usd: float = Field(default=0.0, ge=0, le=_MAX_USD)
    per_chat_daily_usd: float = Field(default=0.0, ge=0, le=_MAX_USD)
    per_job_daily_usd: float = Field(default=0.0, ge=0, le=_MAX_USD)
    global_monthly_usd: float = Field(default=0.0, ge=0, le=_MAX_USD)
    per_user_daily_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)
    per_chat_daily_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)
    per_job_daily_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)
    global_monthly_tokens: int = Field(default=0, ge=0, le=_MAX_TOKENS)
    warn_at: float = Field(default=0.8, gt=0, lt=1)  # share of a limit that brings a warning
    # Admins' own messages are not limited (scheduled jobs always are, whoever made them).
    admins_exempt: bool = True
    timezone: str = "UTC"
    keep_days: int = Field(default=400, ge=2, le=3650)  # daily totals are kept this long

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return known_timezone(value)


class OtelSettings(Section):
    """Traces over OTLP/HTTP when `endpoint` is set and `pip install 'chatgate[otel]'` is done."""

    endpoint: str = ""  # e.g. http://localhost:4318/v1/traces
    service_name: str = "chatgate"
    headers: dict[str, str] = {}  # sent with each export (an API key for a hosted backend)

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_url(value, ("http", "https"))
