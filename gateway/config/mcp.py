"""`[mcp]`: MCP servers as tool sources (tools/mcp/)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.config.base import DAY, HOUR, Section
from gateway.config.urls import check_url

_MCP_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")


class MCPServerSettings(Section):
    """One MCP server (tools/mcp/): a command run over stdio, or a URL (streamable HTTP; legacy
    SSE when the path ends in /sse). Every value in `env` and `headers` counts as a secret."""

    enabled: bool = True
    command: str = ""  # stdio: the program, its args, extra env (merged over a minimal one), cwd
    args: list[str] = []
    env: dict[str, SecretStr] = {}
    cwd: Path | None = None
    url: str = ""
    headers: dict[str, SecretStr] = {}
    # Server tool names (shell-style wildcards allowed); include empty: all, exclude wins.
    include_tools: list[str] = []
    exclude_tools: list[str] = []
    timeout_seconds: float = Field(default=60.0, gt=0, le=DAY)  # one tool call
    # Start, handshake, tool list.
    startup_timeout_seconds: float = Field(default=30.0, gt=0, le=HOUR)
    # destructive: ask unless the tool is read-only: listed in read_only_tools, or (only with
    # trust_hints) marked readOnlyHint and not destructiveHint by the server.
    approval: Literal["destructive", "always", "never"] = "destructive"
    # Server tool names (shell-style wildcards) the operator vouches for as read-only.
    read_only_tools: list[str] = []
    # Believe the server's own readOnlyHint/destructiveHint: a hostile server can lie.
    trust_hints: bool = False
    prompt_commands: list[str] = []  # server prompts offered as slash commands

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return check_url(value, ("http", "https"))

    @model_validator(mode="after")
    def _one_transport(self) -> MCPServerSettings:
        if self.command and self.url:
            raise ValueError("set either command (stdio) or url (HTTP) for a server, not both")
        if not self.command and not self.url:
            raise ValueError("set command (a stdio server) or url (an HTTP server)")
        return self


class MCPSettings(Section):
    servers: dict[str, MCPServerSettings] = {}
    # A server that fails or drops is retried after this delay, doubling up to the maximum.
    reconnect_min_seconds: float = Field(default=1.0, gt=0, le=HOUR)
    reconnect_max_seconds: float = Field(default=60.0, gt=0, le=DAY)

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, MCPServerSettings]) -> dict[str, MCPServerSettings]:
        for name in value:
            if not _MCP_SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r}: use letters, digits, '-' and '_' (at most 32)"
                )
        return value
