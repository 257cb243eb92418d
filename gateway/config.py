"""Settings: one validated model built once at start from `chatgate.toml` and CHATGATE_* env.

Precedence, highest first: explicit arguments, environment (`CHATGATE_LLM__MODEL`),
the TOML file (`--config`, `CHATGATE_CONFIG` or `./chatgate.toml`), defaults.
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from gateway.secrets import is_secret_name
from gateway.sessions import Isolation


class Section(BaseModel):
    """A settings section: unknown keys are errors, so a misspelt one is never ignored."""

    model_config = ConfigDict(extra="forbid")


class LLMSettings(Section):
    base_url: str = "http://localhost:11434/v1"
    api_key: SecretStr = SecretStr("")
    model: str = "qwen3:8b"
    # Provider name for the tool policy; empty means derived from the base_url host.
    provider: str = ""
    tool_call_format: Literal["native", "text", "auto"] = "auto"
    # Stream completions (SSE); a server that ignores it answers whole and still works.
    stream: bool = True
    temperature: float | None = None
    max_tokens: int | None = Field(default=None, gt=0)  # per completion
    timeout: float = Field(default=120.0, gt=0)  # seconds for one request (read)
    connect_timeout: float = Field(default=10.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    retry_base_delay: float = Field(default=0.5, ge=0)
    retry_max_delay: float = Field(default=30.0, ge=0)
    max_connections: int = Field(default=512, ge=1)
    extra_headers: dict[str, str] = {}
    # Images to the model as image parts: "auto" tries and, when the server refuses,
    # remembers it for the model (in memory) and falls back to vision_model or a note.
    vision: Literal["auto", "on", "off"] = "auto"
    vision_model: str = ""  # set: the vision_analyze tool asks this model (same server)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _http_url(value)

    @property
    def provider_name(self) -> str:
        return self.provider or (urlsplit(self.base_url).hostname or "")


def _http_url(value: str, *, empty_ok: bool = False) -> str:
    if empty_ok and not value:
        return value
    if not value.startswith(("http://", "https://")):
        raise ValueError("must start with http:// or https://")
    return value.rstrip("/")


class MediaSettings(Section):
    """Files in and out of the chat (gateway/media/)."""

    max_image_px: int = Field(default=1568, ge=64)  # long side of images sent to the model
    max_images: int = Field(default=4, ge=1)  # image parts in one request
    # Earlier images are sent again when the person refers to them within this many turns.
    image_lookback_turns: int = Field(default=3, ge=0)
    max_download_mb: float = Field(default=20.0, gt=0)  # any file fetched from a platform
    max_upload_mb: float = Field(default=50.0, gt=0)  # any file sent (platforms cap it lower)

    @property
    def max_download_bytes(self) -> int:
        return int(self.max_download_mb * 1_000_000)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1_000_000)


class MediaEndpoint(Section):
    """An OpenAI-compatible media endpoint; an empty api_key borrows llm.api_key only when the
    endpoint is on the LLM's own server (a key is never sent to another host)."""

    base_url: str = ""
    api_key: SecretStr = SecretStr("")
    timeout: float = Field(default=120.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return _http_url(value, empty_ok=True)


class STTSettings(MediaEndpoint):
    """Speech to text: POST {base_url}/audio/transcriptions (empty base_url: llm.base_url)."""

    enabled: bool = True
    model: str = "whisper-1"
    language: str = ""  # ISO-639-1 hint, e.g. "de"; empty: the server detects it
    echo_transcript: bool = False  # show the person what was understood


class TTSSettings(MediaEndpoint):
    """Text to speech: POST {base_url}/audio/speech; empty base_url: no text_to_speech."""

    model: str = "tts-1"
    voice: str = "alloy"
    # Answer with a voice note too: never, when the person sent one, or always.
    reply_with_voice: Literal["off", "when_voice", "always"] = "off"


class ImagesSettings(MediaEndpoint):
    """Image generation: POST {base_url}/images/generations; empty base_url: no image_generate."""

    model: str = "gpt-image-1"
    size: str = Field(default="1024x1024", pattern=r"^(auto|\d{2,5}x\d{2,5})$")


class RedisSettings(Section):
    url: str = ""  # empty: the embedded store under data_dir
    key_prefix: str = "chatgate"
    max_connections: int = Field(default=64, ge=1)

    @field_validator("url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if value and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("must start with redis://, rediss:// or unix:// (or be empty)")
        return value


class ToolRule(Section):
    """One allow/deny pair of the tool policy; names are tools, `group:<name>` or `*`."""

    allow: list[str] = []  # empty: whatever the earlier layers left
    deny: list[str] = []


class SandboxTerminalSettings(Section):
    # When the gateway runs as root, sandboxed commands run as this unprivileged user.
    user: str = "nobody"
    # Extra host paths the sandbox sees read-only (a toolchain in /nix, /srv/data, ...).
    ro_paths: list[Path] = []


class LocalTerminalSettings(Section):
    # When the gateway runs as root, commands run as this unprivileged user (required then:
    # without it the local backend is not offered to a root gateway).
    user: str = ""


class SSHTerminalSettings(Section):
    host: str = ""
    user: str = ""  # empty: the gateway user's name
    port: int = Field(default=22, ge=1, le=65535)
    key_file: Path | None = None  # empty: ssh's default identities
    remote_dir: str = ""  # commands run here (relative to the remote home when not absolute)
    known_hosts: Path | None = None  # default ~/.ssh/known_hosts; unknown host keys are refused
    connect_timeout: float = Field(default=10.0, gt=0)


class DockerTerminalSettings(Section):
    image: str = "python:3.12-slim"  # needs bash, coreutils' timeout, and python3 for code
    cpus: float = Field(default=1.0, gt=0)
    idle_seconds: float = Field(default=600.0, gt=0)  # a session's container is removed then
    cli: str = "docker"  # the docker command (talks to the engine at DOCKER_HOST)


class TerminalSettings(Section):
    """Where shell commands and execute_code scripts run (tools/terminal/)."""

    backend: Literal["sandbox", "local", "ssh", "docker"] = "sandbox"
    network: bool = False  # sandbox and docker: off means no network at all, not even 127.0.0.1
    # When the sandbox (or docker) cannot run here, fall back to the local backend instead of
    # offering no shell at all.
    allow_unsandboxed: bool = False
    cpu_seconds: int = Field(default=120, ge=1)  # CPU time per process
    memory_mb: int = Field(default=2048, ge=16)  # data segment per process (RLIMIT_DATA)
    max_processes: int = Field(default=256, ge=8)  # processes of the user running commands
    # Environment variables passed to commands besides PATH, HOME, LANG, LC_*, TERM, TZ, ...
    env_passthrough: list[str] = []
    # execute_code: wall time of a script (time spent in its tool calls is not counted).
    code_timeout: float = Field(default=120.0, gt=0)
    code_max_tool_calls: int = Field(default=50, ge=0)
    # execute_code approval: auto asks unless the backend isolates (sandbox, docker).
    code_approval: Literal["auto", "always", "never"] = "auto"
    python: str = "python3"  # interpreter execute_code runs, found on the backend's PATH
    sandbox: SandboxTerminalSettings = SandboxTerminalSettings()
    local: LocalTerminalSettings = LocalTerminalSettings()
    ssh: SSHTerminalSettings = SSHTerminalSettings()
    docker: DockerTerminalSettings = DockerTerminalSettings()

    @model_validator(mode="after")
    def _backend_needs(self) -> TerminalSettings:
        if self.backend == "ssh" and not self.ssh.host:
            raise ValueError("backend 'ssh' needs tools.terminal.ssh.host")
        return self


class ToolsSettings(Section):
    # Default: a sibling of data_dir ("~/.chatgate-workspace"), never inside it.
    workspace: Path | None = None
    # Whose files the file tools see: "chat" gives each chat {workspace}/{platform}-{chat_id}/,
    # "user" each person in a chat {...}/u-{user_id}/, "shared" everybody the root itself.
    workspace_scope: Literal["shared", "chat", "user"] = "chat"
    # Ask a person before write_file replaces an existing file.
    confirm_overwrite: bool = False
    attachment_max_bytes: int = Field(default=20_000_000, ge=1)  # save_attachment's limit
    # Tool policy (tools/policy.py), narrowed layer by layer: allow/deny here, then
    # `providers` ("openrouter", then "openrouter/<model>"), then the chat's profile (or else
    # its platform's), then `subagent` in sub-agents. Deny wins over allow in every layer.
    allow: list[str] = []  # empty: every tool, minus deny
    deny: list[str] = []
    providers: dict[str, ToolRule] = {}
    profiles: dict[str, ToolRule] = {}  # named rules, e.g. readonly = {allow = ["group:fs"]}
    platform_profiles: dict[str, str] = {}  # platform -> profile name
    chat_profiles: dict[str, str] = {}  # "platform:chat_id" -> profile name; beats the platform's
    subagent: ToolRule = ToolRule()
    # web_fetch: hosts listed here may be fetched even at private addresses (e.g. "wiki.lan").
    web_allow_hosts: list[str] = []
    # Seconds per fetch (redirects included) or search.
    web_timeout: float = Field(default=20.0, gt=0)
    web_max_bytes: int = Field(default=1_000_000, ge=10_000)  # body read at most; the rest is cut
    # web_search: url is the SearXNG base URL, or for Brave an override of its API URL.
    web_search_url: str = ""
    web_search_api_key: SecretStr = SecretStr("")
    # Declared after url and key so its validator can see them.
    web_search_provider: Literal["", "searxng", "brave"] = ""
    clarify_timeout: float = Field(default=300.0, gt=0)  # seconds the clarify tool waits
    clarify_answer_by: Literal["asker", "chat"] = "asker"  # who may answer a question
    shell_timeout: float = Field(default=30.0, gt=0)
    max_output_chars: int = Field(default=16000, ge=1000)
    # Regexes searched in each simple command of a shell call ("rm -rf build"): block wins,
    # then ask; allow lifts a built-in ask (never a built-in block).
    shell_extra_allow: list[str] = []
    shell_extra_ask: list[str] = []
    shell_extra_block: list[str] = []
    terminal: TerminalSettings = TerminalSettings()
    # Tools on demand (gateway/toolbox.py): only `core` is sent every turn; the model loads
    # other allowed groups with load_tools for the rest of the session. false: send them all.
    on_demand: bool = True
    core: list[str] = [
        "read_file",
        "write_file",
        "edit_file",
        "shell",
        "web_search",
        "web_fetch",
        "memory",
        "skill",
        "session_search",
        "delegate",
    ]

    @field_validator("shell_extra_allow", "shell_extra_ask", "shell_extra_block")
    @classmethod
    def _shell_regexes(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from None
        return patterns

    @field_validator("web_search_provider")
    @classmethod
    def _search_needs(cls, value: str, info: Any) -> str:
        if value == "searxng" and not info.data.get("web_search_url"):
            raise ValueError("'searxng' needs tools.web_search_url (the SearXNG base URL)")
        key = info.data.get("web_search_api_key")
        if value == "brave" and not (key and key.get_secret_value()):
            raise ValueError("'brave' needs tools.web_search_api_key")
        return value


class BrowserSettings(Section):
    """Browser tools (tools/browser/): Chromium driven by Playwright, one context per session."""

    enabled: bool = True  # false: the browser tools are never offered
    # Empty: `chromium` (or chromium-browser, google-chrome) on PATH, else one Playwright installed.
    executable_path: str = ""
    headless: bool = True
    extra_args: list[str] = []  # more Chromium switches, after the built-in ones
    idle_seconds: float = Field(default=300.0, gt=0)  # a session's context closes after this
    max_contexts: int = Field(default=4, ge=1)  # open at once; the least recently used goes first
    # Ask a person before clicking or submitting something that looks like buy/pay/delete/send.
    approve_actions: bool = True
    navigation_timeout: float = Field(default=30.0, gt=0)  # seconds for a page to load
    action_timeout: float = Field(default=10.0, gt=0)  # seconds for a click, typing, a select
    max_snapshot_chars: int = Field(default=8000, ge=1000)  # page snapshot shown to the model
    max_download_bytes: int = Field(default=50_000_000, ge=1)  # a larger download is deleted


class AgentSettings(Section):
    system_prompt: str = ""  # extra instructions added to the built-in prompt
    max_iterations: int = Field(default=25, ge=1)
    max_turn_seconds: float = Field(default=600.0, gt=0)
    tool_timeout: float = Field(default=120.0, gt=0)
    max_tokens_per_turn: int = Field(default=400_000, ge=1000)
    history_token_budget: int = Field(default=24_000, ge=1000)
    # The model that writes compaction summaries (gateway/compaction.py); empty: llm.model.
    summary_model: str = ""
    subagent_max_iterations: int = Field(default=15, ge=1)
    subagent_max_seconds: float = Field(default=300.0, gt=0)


class SkillsSettings(Section):
    """Skills the agent writes with skill_manage, kept in the store (tools/skill_store.py)."""

    # A new or changed skill waits for an admin's Approve (access.admins) before it is saved.
    manage_approval: bool = True
    max_skill_bytes: int = Field(default=1_000_000, ge=10_000)  # all files of one skill
    max_file_bytes: int = Field(default=256_000, ge=1_000)  # one file
    max_files: int = Field(default=50, ge=1)


class HistorySettings(Section):
    """Past conversations: the search index behind session_search, and how long it keeps them."""

    # Conversations (and their index entries) untouched this long are deleted; 0 keeps them.
    retention_days: float = Field(default=90.0, ge=0)


class DelegationSettings(Section):
    """The delegate tool (tools/subagent.py): sub-agents with their own context and limits."""

    max_parallel: int = Field(default=3, ge=1, le=16)  # tasks in one delegate call
    # 1: sub-agents cannot delegate; 2: they may, once more; and so on.
    max_depth: int = Field(default=1, ge=1, le=4)
    max_tokens_per_task: int = Field(default=200_000, ge=1000)  # prompt + completion


class RouterSettings(Section):
    busy_mode: Literal["queue", "interrupt"] = "queue"
    max_concurrent_turns: int = Field(default=512, ge=1)
    max_queued_per_session: int = Field(default=20, ge=1)
    # Stored messages waiting across all sessions; past it new ones are refused with a reason.
    max_pending_total: int = Field(default=100_000, ge=1)
    queue_notice: bool = True
    max_message_chars: int = Field(default=16_000, ge=100)
    dedupe_ttl: float = Field(default=3600.0, gt=0)
    # A session's lease, renewed every third of it while its turn runs: a dead process's
    # sessions are picked up by another within about this long.
    lease_ttl: float = Field(default=5.0, ge=1, le=300)
    # Delay before the first typing indicator; fast answers need none.
    typing_delay: float = Field(default=0.8, ge=0)


class SessionsSettings(Section):
    isolation: Isolation = Isolation.AUTO
    per_platform: dict[str, Isolation] = {}  # e.g. {slack = "thread", telegram = "chat"}

    def for_platform(self, platform: str) -> Isolation:
        return self.per_platform.get(platform, self.isolation)


class MemorySettings(Section):
    chat_chars: int = Field(default=2000, ge=100)
    user_chars: int = Field(default=1200, ge=100)


class AccessSettings(Section):
    admins: list[str] = []  # "platform:user_id"
    allowed_users: list[str] = []  # empty: everyone; otherwise "platform:user_id"
    blocked_users: list[str] = []
    # Per-user message budget across all chats; 0 disables.
    rate_limit_per_minute: int = Field(default=30, ge=0)
    approvers: Literal["requester_and_admins", "admins"] = "requester_and_admins"
    # Platform roles (Discord role ids) that may use /new and /forget in groups, like admins.
    moderator_roles: list[str] = []


class ApprovalSettings(Section):
    timeout_seconds: float = Field(default=300.0, gt=0)  # no decision by then means deny
    audit_max_entries: int = Field(default=10_000, ge=100)


class SchedulerSettings(Section):
    """Reminders and scheduled prompts (gateway/scheduler.py)."""

    enabled: bool = True  # false: this process never runs jobs (it may still create them)
    default_timezone: str = "UTC"  # IANA name for times given without one
    # A run late by up to this many seconds (gateway down, overloaded) still fires, once;
    # later than that it is reported to its chat as missed.
    misfire_grace_seconds: float = Field(default=300.0, ge=0)
    max_jobs_per_chat: int = Field(default=25, ge=1)
    min_interval_seconds: float = Field(default=60.0, gt=0)
    # The lease of the one process that runs jobs; another takes over within about 4/3 of it.
    leader_ttl: float = Field(default=7.0, ge=1)
    resync_seconds: float = Field(default=30.0, gt=0)  # the leader re-reads every job this often
    delivery_attempts: int = Field(default=4, ge=1)
    retry_base_delay: float = Field(default=2.0, ge=0)
    retry_max_delay: float = Field(default=60.0, ge=0)
    run_log_size: int = Field(default=50, ge=1)  # runs kept per job

    @field_validator("default_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo

        try:
            ZoneInfo(value)
        except (KeyError, ValueError):
            raise ValueError("unknown timezone; use an IANA name such as Europe/Berlin") from None
        return value


class StreamingOverride(Section):
    """`[streaming.platforms.<name>]`: one platform's exceptions to the streaming defaults."""

    enabled: bool | None = None
    interval_ms: int | None = Field(default=None, ge=100)


class StreamingSettings(Section):
    """Replies shown while the model writes them (gateway/streaming/), when the server streams."""

    enabled: bool = True
    # Least time between two updates of one streamed message; 0: the platform's own default
    # (1000 ms on Telegram and Discord, 500 on Slack).
    interval_ms: int = Field(default=0, ge=0)
    # A reply that is over within this long after its first words is sent whole, without a
    # draft or edits first (no flicker and one notification for short, fast answers).
    first_delay_ms: int = Field(default=400, ge=0)
    # Lines shown while tools run: none, one short line per call, or with arguments and results.
    progress: Literal["off", "tools", "verbose"] = "tools"
    show_reasoning: bool = False  # stream the model's reasoning until the answer starts
    platforms: dict[str, StreamingOverride] = {}

    def for_platform(self, platform: str) -> tuple[bool, float | None]:
        """(enabled, interval in seconds or None for the platform's default) for a platform."""
        override = self.platforms.get(platform, StreamingOverride())
        enabled = self.enabled if override.enabled is None else override.enabled
        interval_ms = override.interval_ms or self.interval_ms
        return enabled, (interval_ms / 1000 if interval_ms else None)


class HTTPSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    enabled: bool = True


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
    timeout_seconds: float = Field(default=60.0, gt=0)  # one tool call
    startup_timeout_seconds: float = Field(default=30.0, gt=0)  # start, handshake, tool list
    # destructive: ask unless the tool says readOnlyHint (and not destructiveHint).
    approval: Literal["destructive", "always", "never"] = "destructive"
    prompt_commands: list[str] = []  # server prompts offered as slash commands

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

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
    reconnect_min_seconds: float = Field(default=1.0, gt=0)
    reconnect_max_seconds: float = Field(default=60.0, gt=0)

    @field_validator("servers")
    @classmethod
    def _server_names(cls, value: dict[str, MCPServerSettings]) -> dict[str, MCPServerSettings]:
        for name in value:
            if not _MCP_SERVER_NAME.match(name):
                raise ValueError(
                    f"server name {name!r}: use letters, digits, '-' and '_' (at most 32)"
                )
        return value


_config_path: ContextVar[Path | None] = ContextVar("chatgate_config_path", default=None)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CHATGATE_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
    )

    data_dir: Path = Path.home() / ".chatgate"
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"
    llm: LLMSettings = LLMSettings()
    redis: RedisSettings = RedisSettings()
    tools: ToolsSettings = ToolsSettings()
    browser: BrowserSettings = BrowserSettings()
    agent: AgentSettings = AgentSettings()
    router: RouterSettings = RouterSettings()
    sessions: SessionsSettings = SessionsSettings()
    memory: MemorySettings = MemorySettings()
    access: AccessSettings = AccessSettings()
    approvals: ApprovalSettings = ApprovalSettings()
    scheduler: SchedulerSettings = SchedulerSettings()
    http: HTTPSettings = HTTPSettings()
    mcp: MCPSettings = MCPSettings()
    media: MediaSettings = MediaSettings()
    stt: STTSettings = STTSettings()
    tts: TTSSettings = TTSSettings()
    images: ImagesSettings = ImagesSettings()
    streaming: StreamingSettings = StreamingSettings()
    skills: SkillsSettings = SkillsSettings()
    history: HistorySettings = HistorySettings()
    delegation: DelegationSettings = DelegationSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = _config_path.get()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if path is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    @property
    def workspace(self) -> Path:
        """`tools.workspace`, or `{data_dir}-workspace` beside the data directory: never inside
        it, so a command in the workspace is not one `..` away from the store and secrets."""
        if self.tools.workspace is not None:
            return self.tools.workspace.expanduser().resolve()
        data = self.data_dir.expanduser().resolve()
        return data.with_name(f"{data.name}-workspace")


class ConfigError(Exception):
    """Invalid configuration; `problems` holds one line per bad key."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def config_path(explicit: str | os.PathLike[str] | None = None) -> Path | None:
    """The TOML file to read: explicit path, CHATGATE_CONFIG, or ./chatgate.toml if present."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("CHATGATE_CONFIG")
    if env:
        return Path(env)
    local = Path("chatgate.toml")
    return local if local.is_file() else None


def settings_model(sections: Mapping[str, type[BaseModel]] | None = None) -> type[Settings]:
    """Settings extended with the given sections (the platforms' `[telegram]` ..., which the
    core does not know); their env names follow the same form (`CHATGATE_TELEGRAM__TOKEN`)."""
    return _extended(tuple(sorted((sections or {}).items())))


@functools.cache
def _extended(sections: tuple[tuple[str, type[BaseModel]], ...]) -> type[Settings]:
    if not sections:
        return Settings
    fields: dict[str, Any] = {
        name: (model, Field(default_factory=model)) for name, model in sections
    }
    extended: type[Settings] = create_model("Settings", __base__=Settings, **fields)
    return extended


def load_settings(
    path: str | os.PathLike[str] | None = None,
    *,
    sections: Mapping[str, type[BaseModel]] | None = None,
    **overrides: Any,
) -> Settings:
    """Build and validate Settings once; raises ConfigError with one line per problem.

    `sections` adds settings sections the core does not define (the composition root
    passes the platforms'; see gateway/app.py `load_settings`).
    """
    model = settings_model(sections)
    toml_path = config_path(path)
    if toml_path is not None:
        if not toml_path.is_file():
            raise ConfigError([f"config file {toml_path}: not found"])
        try:
            tomllib.loads(toml_path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError([f"config file {toml_path}: invalid TOML: {exc}"]) from None
    token = _config_path.set(toml_path)
    try:
        return model(**overrides)
    except ValidationError as exc:
        raise ConfigError([_problem_line(err) for err in exc.errors()]) from None
    finally:
        _config_path.reset(token)


def _problem_line(err: Any) -> str:
    key = ".".join(str(part) for part in err["loc"]) or "(root)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown setting (check the spelling)"
    value = err.get("input")
    shown = "" if isinstance(value, dict | list) or value is None else f" (got {value!r})"
    if is_secret_name(key):
        shown = ""
    return f"{key}: {msg}{shown}"


def masked(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain data with every secret masked, for `config show`."""
    data: dict[str, Any] = _mask(settings.model_dump(mode="json"))
    # MCP servers take their secrets under any name (GITHUB_TOKEN, X-Api-Key, ...).
    for server in data["mcp"]["servers"].values():
        for table in ("env", "headers"):
            server[table] = dict.fromkeys(server[table], "********")
    return data


def _mask(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _mask(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_mask(v, key) for v in node]
    if isinstance(node, str) and node and is_secret_name(key):
        return "********"
    if key == "url" and isinstance(node, str) and "@" in node:
        return mask_url(node)
    return node


def mask_url(url: str) -> str:
    """Hide the password in a URL such as redis://:pw@host:6379/0."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:****@{netloc}"))
