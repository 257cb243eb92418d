"""Mattermost settings: the `[mattermost]` section of chatgate.toml and `CHATGATE_MATTERMOST__*`."""

from __future__ import annotations

from pydantic import Field, SecretStr

from gateway.sdk import MINUTE, HttpURL, Section

MB = 1024 * 1024


class MattermostSettings(Section):
    url: HttpURL = ""  # the server, e.g. https://chat.example.com (API at /api/v4)
    token: SecretStr | None = None  # the bot account's access token
    team: str = ""  # the team's name (as in its URL); empty: any team the bot is in
    allow_dms: bool = True
    allowed_channels: list[str] = []  # channel ids; empty: every channel; DMs are not affected
    allowed_users: list[str] = []  # user ids; empty: everyone
    # A mention in a channel is answered in a thread under it (each thread its own session);
    # false: in the channel itself, one session per channel.
    reply_in_thread: bool = True
    # The slash command's token (Integrations > Slash Commands); set: POST /mattermost/command.
    command_token: SecretStr | None = None
    # Where the Mattermost server reaches this gateway, e.g. https://gw.example.com: button
    # presses come back to {public_url}/mattermost/actions. Empty: messages have no buttons.
    public_url: HttpURL = ""
    # Key of the per-button HMAC secrets; empty: derived from the bot token.
    action_secret: SecretStr | None = None
    max_file_bytes: int = Field(default=100 * MB, ge=1, le=1024 * MB)  # the server's default
    # The WebSocket leader lease; another process takes the socket over within it.
    leader_ttl: float = Field(default=9.0, ge=1, le=5 * MINUTE)
