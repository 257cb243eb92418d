"""Discord settings: the `[discord]` section of chatgate.toml and `CHATGATE_DISCORD__*` env."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SecretStr, field_validator

from gateway.sdk import MINUTE, HttpURL, Section, WebSocketURL


class DiscordSettings(Section):
    token: SecretStr | None = None
    api_url: HttpURL = "https://discord.com/api/v10"
    gateway_url: WebSocketURL = "wss://gateway.discord.gg/"
    allow_dms: bool = True
    free_response_channels: list[str] = []  # channel ids answered without a mention
    auto_thread: bool = False  # a mention in a channel opens a thread for the answer
    # Channel messages not addressed to the bot are kept as context for its next answer there.
    channel_context: bool = True
    allowed_guilds: list[str] = []  # the allowed_* lists: ids; empty means all
    allowed_channels: list[str] = []  # a thread is allowed when its parent channel is
    allowed_users: list[str] = []  # users and roles together: a person needs either
    allowed_roles: list[str] = []
    sync_guilds: list[str] = []  # slash commands go to these guilds only; empty: globally
    # Set both to split the bot over processes (each its own shards, no leader election).
    shard_ids: list[int] | None = None
    shard_count: int | None = Field(default=None, ge=1, le=100_000, validate_default=True)
    guild_ready_timeout: float = Field(default=2.0, ge=0, le=5 * MINUTE)  # waited for guilds
    # The gateway leader lease; another process takes over within it.
    leader_ttl: float = Field(default=9.0, ge=1, le=5 * MINUTE)

    @field_validator("shard_count")
    @classmethod
    def _shards_fit(cls, value: int | None, info: Any) -> int | None:
        ids = info.data.get("shard_ids")
        if ids and value is None:
            raise ValueError("discord.shard_ids needs discord.shard_count")
        if ids and value is not None and any(not 0 <= i < value for i in ids):
            raise ValueError("every discord.shard_ids entry must be in [0, shard_count)")
        return value
