"""WhatsApp settings: the `[whatsapp]` section of chatgate.toml and `CHATGATE_WHATSAPP__*` env."""

from __future__ import annotations

import re
from typing import Self

from pydantic import BaseModel, Field, SecretStr, model_validator

from gateway.sdk import HOUR, HttpURL, Section


class WhatsAppTemplate(BaseModel):
    """The approved message template that carries reminders and job results outside the
    24-hour customer-service window. Its body has one variable, {{1}}, which receives the
    message text; empty `name`: no template, such messages are reported as undeliverable."""

    name: str = Field(default="", pattern=r"^[a-z0-9_]{0,512}$")
    language: str = Field(default="en_US", pattern=r"^[A-Za-z]{2,3}(_[A-Za-z0-9]{2,4})?$")


class WhatsAppSettings(Section):
    phone_number_id: str = Field(default="", pattern=r"^[0-9]*$")  # the business number's id
    access_token: SecretStr | None = None  # a system user's token (whatsapp_business_messaging)
    app_secret: SecretStr | None = None  # the Meta app's secret: signs every webhook POST
    verify_token: SecretStr | None = None  # the string set as "Verify token" for the webhook
    api_version: str = Field(default="v23.0", pattern=r"^v[0-9]+\.[0-9]+$")
    api_url: HttpURL = "https://graph.facebook.com"
    # A compiled pattern runs on Python's re: Rust's regex engine (pydantic's default) would
    # build Unicode \w tables of several MB at start for it.
    webhook_path: str = Field(default="/whatsapp/webhook", pattern=re.compile(r"^/[\w/-]{1,100}\Z"))
    allowed_numbers: list[str] = []  # wa ids (digits, country code first); empty: everyone
    templates: WhatsAppTemplate = WhatsAppTemplate()
    send_retries: int = Field(default=3, ge=0, le=20)  # after a throttle error or a 5xx
    max_retry_after: float = Field(default=60.0, ge=0, le=HOUR)  # a longer wait fails

    @model_validator(mode="after")
    def _complete_when_enabled(self) -> Self:
        if self.access_token is None or not self.access_token.get_secret_value():
            return self
        missing = [
            name
            for name in ("phone_number_id", "app_secret", "verify_token")
            if not _given(getattr(self, name))
        ]
        if missing:
            raise ValueError(
                "with whatsapp.access_token set, also set "
                + ", ".join(f"whatsapp.{name}" for name in missing)
            )
        return self


def _given(value: object) -> bool:
    if isinstance(value, SecretStr):
        return bool(value.get_secret_value())
    return bool(value)
