"""Slack settings: the `[slack]` section of chatgate.toml and `CHATGATE_SLACK__*` env."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, SecretStr, field_validator

from gateway.sdk import DAY, HOUR, WEEK, HttpURL, Section


class SlackSettings(Section):
    bot_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    app_token: SecretStr | None = Field(default=None, validate_default=True)  # set: Socket Mode
    api_url: HttpURL = "https://slack.com/api/"
    # A compiled pattern runs on Python's re: Rust's regex engine (pydantic's default) would
    # build Unicode \w tables of several MB at start for it.
    slash_command: str = Field(default="/chatgate", pattern=re.compile(r"^/[\w-]{1,31}\Z"))
    # In a thread the bot answered, later messages are answered without a new mention.
    thread_followups: bool = False
    thread_ttl: float = Field(default=WEEK, gt=0, le=365 * DAY)  # seconds it is remembered
    # Emoji name shown on the message being answered while its turn runs; "" shows none.
    working_reaction: str = "hourglass_flowing_sand"
    send_retries: int = Field(default=3, ge=0, le=20)  # retries after 429 or a 5xx
    max_retry_after: float = Field(default=60.0, ge=0, le=HOUR)  # a longer 429 wait fails
    # Replies in threads stream with chat.startStream/appendStream/stopStream; false (or
    # when Slack refuses them) they stream by posting and editing with chat.update.
    stream_methods: bool = True
    allowed_teams: list[str] = []  # workspace ids (T...); empty: every workspace
    allowed_channels: list[str] = []  # channel ids (C.../G...); empty: all; DMs are not affected
    allowed_users: list[str] = []  # user ids (U...); empty: everyone

    @field_validator("app_token")
    @classmethod
    def _needs_a_transport(cls, value: SecretStr | None, info: Any) -> SecretStr | None:
        if not value and info.data.get("bot_token") and not info.data.get("signing_secret"):
            raise ValueError(
                "set slack.app_token (Socket Mode) or slack.signing_secret (Events API)"
            )
        return value
