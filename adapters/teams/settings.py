"""Teams settings: the `[teams]` section of chatgate.toml and `CHATGATE_TEAMS__*` env."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from gateway.sdk import DAY, HttpURL, Section

# The Bot Framework's public cloud: who signs the activities Teams sends, and where a
# multi-tenant bot gets the token it replies with.
BOT_FRAMEWORK_ISSUER = "https://api.botframework.com"
OPENID_METADATA_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
TOKEN_SCOPE = "https://api.botframework.com/.default"


class TeamsSettings(Section):
    app_id: str = ""  # the bot's Microsoft App ID (Entra application client id)
    app_password: SecretStr | None = None  # a client secret of that application
    # Instead of a password: a PEM file holding the application's certificate and its key.
    certificate_path: Path | None = None
    # Single-tenant bots name their tenant; empty: a multi-tenant bot (botframework.com).
    tenant_id: str = ""
    allowed_tenants: list[str] = []  # tenant ids; empty: every tenant
    allowed_users: list[str] = []  # Entra object ids (aadObjectId); empty: everyone
    # Who signs incoming activities and where its keys are listed (tests use a local issuer).
    openid_metadata_url: HttpURL = OPENID_METADATA_URL
    issuer: str = BOT_FRAMEWORK_ISSUER
    # The Entra token endpoint for replies; empty: derived from tenant_id.
    token_url: str = ""
    token_scope: str = TOKEN_SCOPE
    # A compiled pattern runs on Python's re: Rust's regex engine (pydantic's default) would
    # build Unicode \w tables of several MB at start for it.
    endpoint_path: str = Field(default="/teams/messages", pattern=re.compile(r"^/[\w/-]{1,100}\Z"))
    # Plain-HTTP serviceUrls and file links on this machine (the Bot Framework Emulator,
    # tests); off: HTTPS only, as Teams uses.
    allow_local_urls: bool = False
    # Personal chats stream with Teams' streaming activities; false: post, then update.
    native_streaming: bool = True
    send_retries: int = Field(default=3, ge=0, le=20)  # retries after 429 or a 5xx
    max_retry_after: float = Field(default=60.0, ge=0, le=3600)
    # How long a conversation's serviceUrl is remembered for replies from any replica.
    conversation_ttl: float = Field(default=90 * DAY, gt=0, le=3650 * DAY)
    # Files offered with a consent card wait this long for the person to accept.
    file_offer_ttl: float = Field(default=DAY, gt=0, le=30 * DAY)

    @model_validator(mode="after")
    def _needs_a_credential(self) -> TeamsSettings:
        password = self.app_password is not None and self.app_password.get_secret_value()
        if self.app_id and not password and self.certificate_path is None:
            raise ValueError("set teams.app_password or teams.certificate_path")
        return self

    @property
    def authority_tenant(self) -> str:
        return self.tenant_id or "botframework.com"

    @property
    def resolved_token_url(self) -> str:
        if self.token_url:
            return self.token_url
        return f"https://login.microsoftonline.com/{self.authority_tenant}/oauth2/v2.0/token"
