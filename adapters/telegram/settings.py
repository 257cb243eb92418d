"""Telegram settings: the `[telegram]` section of chatgate.toml and `CHATGATE_TELEGRAM__*` env."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from gateway.sdk import GB, HOUR, MINUTE, HttpURL, Section


class TelegramSettings(Section):
    token: SecretStr | None = None
    api_url: HttpURL = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_secret: SecretStr | None = None
    webhook_url: HttpURL = ""
    # A message passes when its sender is in allowed_users (ids or @usernames) or its chat is
    # in allowed_chats (ids; supergroups are negative); both empty: everyone.
    allowed_users: list[str] = []
    allowed_chats: list[str] = []
    # Unaddressed group messages are kept as context for the next answer (needs the bot's
    # privacy mode off in BotFather to see them at all); false: they are dropped.
    group_context: bool = True
    poll_timeout: int = Field(default=25, ge=1, le=300)  # seconds one getUpdates waits
    # The polling lease; another process takes over within about 1.4 times this.
    leader_ttl: float = Field(default=6.0, ge=1, le=5 * MINUTE)
    send_retries: int = Field(default=3, ge=0, le=20)  # retries after 429 or a network error
    max_retry_after: float = Field(default=60.0, ge=0, le=HOUR)  # a longer 429 wait fails
    # The Bot API's getFile limit is 20 MB; a local Bot API server allows 2 GB.
    download_max_bytes: int = Field(default=20_000_000, ge=1, le=2 * GB)
    # Replies in private chats stream as drafts (sendMessageDraft, Bot API 9.3+); false:
    # they stream by posting and editing, as in groups.
    drafts: bool = True
