"""Matrix settings: the `[matrix]` section of chatgate.toml and `CHATGATE_MATRIX__*` env."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, SecretStr, model_validator

from gateway.sdk import GB, MINUTE, HttpURL, Section


class MatrixSettings(Section):
    homeserver: HttpURL = ""  # https://matrix.example.org (the client-server API base)
    # @bot:example.org. Compiled: Python's re runs it (see adapters/slack/settings.py).
    user_id: str = Field(default="", pattern=re.compile(r"^(@[^:\s]+:\S+)?\Z"))
    # An access token of one device; or a password, with which the first start logs in as a
    # new device named `device_name` and keeps its token under store_path.
    access_token: SecretStr | None = None
    password: SecretStr | None = None
    device_name: str = "chatgate"
    # The sync position's fallback copy, the login a password made and the end-to-end
    # crypto store (Olm account, Megolm sessions, devices). Keep it: a lost store is a new
    # device that cannot read what was sent to the old one.
    store_path: Path = Path.home() / ".chatgate" / "matrix"
    # A message passes when its sender is in allowed_users (@user:server) or its room is in
    # allowed_rooms (!room:server); both empty: everyone. Invites are accepted only from
    # allowed users (and, with allowed_users empty, from anyone).
    allowed_users: list[str] = []
    allowed_rooms: list[str] = []
    # Room messages that do not mention the bot are kept as context for the next answer.
    group_context: bool = True
    # Read receipts on the messages the bot takes (people see that it read them).
    read_receipts: bool = True
    sync_timeout: int = Field(default=25, ge=1, le=300)  # seconds one /sync waits
    # The sync lease; another replica takes over within about 1.4 times this.
    leader_ttl: float = Field(default=6.0, ge=1, le=5 * MINUTE)
    # Largest file the bot downloads or uploads (Synapse's default max_upload_size is 50 MB).
    max_file_bytes: int = Field(default=50_000_000, ge=1, le=2 * GB)

    @model_validator(mode="after")
    def _needs_a_login(self) -> MatrixSettings:
        if self.homeserver and not (self.user_id and (self.access_token or self.password)):
            raise ValueError(
                "matrix needs user_id and access_token (or password) with the homeserver"
            )
        return self

    @property
    def configured(self) -> bool:
        return bool(self.homeserver and self.user_id)
