"""Settings: one validated model built once at start from `chatgate.toml` and CHATGATE_* env.

Precedence, highest first: explicit arguments, environment (`CHATGATE_LLM__MODEL`),
the TOML file (`--config`, `CHATGATE_CONFIG` or `./chatgate.toml`), defaults.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
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
    SettingsError,
    TomlConfigSettingsSource,
)

from gateway.config.base import DAY as DAY
from gateway.config.base import GB as GB
from gateway.config.base import HOUR as HOUR
from gateway.config.base import MINUTE as MINUTE
from gateway.config.base import WEEK as WEEK

# Sections live in small modules beside this one; `gateway.config.X` keeps working for all.
from gateway.config.base import Section as Section
from gateway.config.base import ToolRule as ToolRule
from gateway.config.base import config_file, known_timezone
from gateway.config.browser import BrowserSettings as BrowserSettings
from gateway.config.budgets import BudgetSettings as BudgetSettings
from gateway.config.budgets import OtelSettings as OtelSettings
from gateway.config.env import EnvProblem, env_problems, explained
from gateway.config.learning import DelegationSettings as DelegationSettings
from gateway.config.learning import HistorySettings as HistorySettings
from gateway.config.learning import SkillsSettings as SkillsSettings
from gateway.config.llm import DEFAULT_PROVIDER as DEFAULT_PROVIDER
from gateway.config.llm import LLMSettings as LLMSettings
from gateway.config.llm import ModelSettings as ModelSettings
from gateway.config.llm import ProviderSettings as ProviderSettings
from gateway.config.mcp import MCPServerSettings as MCPServerSettings
from gateway.config.mcp import MCPSettings as MCPSettings
from gateway.config.media import ImagesSettings as ImagesSettings
from gateway.config.media import MediaEndpoint as MediaEndpoint
from gateway.config.media import MediaSettings as MediaSettings
from gateway.config.media import STTSettings as STTSettings
from gateway.config.media import TTSSettings as TTSSettings
from gateway.config.profiles import ProfileBinding as ProfileBinding
from gateway.config.profiles import ProfileSettings as ProfileSettings
from gateway.config.profiles import ProfilesSettings as ProfilesSettings
from gateway.config.profiles import profile_problems
from gateway.config.redis import RedisSettings as RedisSettings
from gateway.config.streaming import StreamingOverride as StreamingOverride
from gateway.config.streaming import StreamingSettings as StreamingSettings
from gateway.config.terminal import DockerTerminalSettings as DockerTerminalSettings
from gateway.config.terminal import LocalTerminalSettings as LocalTerminalSettings
from gateway.config.terminal import SandboxTerminalSettings as SandboxTerminalSettings
from gateway.config.terminal import SSHTerminalSettings as SSHTerminalSettings
from gateway.config.terminal import TerminalSettings as TerminalSettings
from gateway.config.urls import HttpURL
from gateway.runtime.secrets import is_secret_name
from gateway.sessions.key import Isolation


class ToolsSettings(Section):
    # Default: a sibling of data_dir ("~/.chatgate-workspace"), never inside it.
    workspace: Path | None = None
    # Whose files the file tools see: "chat" gives each chat {workspace}/{platform}-{chat_id}/,
    # "user" each person in a chat {...}/u-{user_id}/, "shared" everybody the root itself.
    workspace_scope: Literal["shared", "chat", "user"] = "chat"
    # The most one conversation's workspace folder may hold (its regular files); 0: no quota.
    # The file tools never write past it; a command runs only while the folder is under it
    # (rm, rmdir and reading commands always run), so one command can overrun it once.
    workspace_quota_bytes: int = Field(default=0, ge=0, le=1 << 50)
    # Ask a person before write_file replaces an existing file.
    confirm_overwrite: bool = False
    attachment_max_bytes: int = Field(default=20_000_000, ge=1, le=2 * GB)  # save_attachment
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
    web_timeout: float = Field(default=20.0, gt=0, le=10 * MINUTE)
    # Body read at most; the rest is cut.
    web_max_bytes: int = Field(default=1_000_000, ge=10_000, le=GB)
    # web_search: url is the SearXNG base URL, or for Brave an override of its API URL.
    web_search_url: HttpURL = ""
    web_search_api_key: SecretStr = SecretStr("")
    # Declared after url and key so its validator can see them.
    web_search_provider: Literal["", "searxng", "brave"] = ""
    clarify_timeout: float = Field(default=300.0, gt=0, le=WEEK)  # seconds clarify waits
    clarify_answer_by: Literal["asker", "chat"] = "asker"  # who may answer a question
    shell_timeout: float = Field(default=30.0, gt=0, le=DAY)
    max_output_chars: int = Field(default=16000, ge=1000, le=10_000_000)
    # Regexes searched in each simple command of a shell call ("rm -rf build"): block wins,
    # then ask; allow lifts a built-in ask (never a built-in block).
    shell_extra_allow: list[str] = []
    shell_extra_ask: list[str] = []
    shell_extra_block: list[str] = []
    terminal: TerminalSettings = TerminalSettings()
    # Tools on demand (gateway/turn/toolbox.py): only `core` is sent every turn; the model loads
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


class AgentSettings(Section):
    system_prompt: str = ""  # extra instructions added to the built-in prompt
    max_iterations: int = Field(default=25, ge=1, le=10_000)
    max_turn_seconds: float = Field(default=600.0, gt=0, le=DAY)
    tool_timeout: float = Field(default=120.0, gt=0, le=DAY)
    max_tokens_per_turn: int = Field(default=400_000, ge=1000, le=1_000_000_000)
    history_token_budget: int = Field(default=24_000, ge=1000, le=100_000_000)
    # The model that writes compaction summaries (gateway/sessions/compaction.py); empty: llm.model.
    summary_model: str = ""
    subagent_max_iterations: int = Field(default=15, ge=1, le=10_000)
    subagent_max_seconds: float = Field(default=300.0, gt=0, le=DAY)


class RouterSettings(Section):
    # What a message does while its session's turn runs: wait for a turn of its own, stop
    # the running one, or join it at its next step (gateway/turn/steering.py). Not "steer" by
    # default: in a session several people share, a message would join another's turn and
    # run as that person.
    busy_mode: Literal["queue", "interrupt", "steer"] = "queue"
    # Messages from one person within this many ms of each other start one turn (0: off).
    merge_window_ms: int = Field(default=0, ge=0, le=10_000)
    max_concurrent_turns: int = Field(default=512, ge=1, le=1_000_000)
    # Messages being taken in (checked, stored) at once; under a burst the others wait their
    # turn before that, unacknowledged, so turns run while a crowd is still being stored.
    max_concurrent_intake: int = Field(default=256, ge=1, le=1_000_000)
    max_queued_per_session: int = Field(default=20, ge=1, le=100_000)
    # Stored messages waiting across all sessions; past it new ones are refused with a reason.
    max_pending_total: int = Field(default=100_000, ge=1, le=1_000_000_000)
    queue_notice: bool = True
    max_message_chars: int = Field(default=16_000, ge=100, le=10_000_000)
    dedupe_ttl: float = Field(default=3600.0, gt=0, le=30 * DAY)
    # A session's lease, renewed every third of it while its turn runs: a dead process's
    # sessions are picked up by another within about this long.
    lease_ttl: float = Field(default=5.0, ge=1, le=300)
    # Leases are renewed from a thread of their own, so a busy event loop keeps them; only a
    # loop that has not run at all for this long counts as stuck and loses its sessions to
    # another run (whatever the stuck run does next is fenced off).
    lease_stuck_after: float = Field(default=30.0, ge=0.5, le=3600)
    # While the event loop runs more than this far behind, intake starts no turn and the
    # claimer takes one waiting session at a time instead of a batch.
    loop_lag_limit: float = Field(default=1.0, gt=0, le=60)
    # Delay before the first typing indicator; fast answers need none.
    typing_delay: float = Field(default=0.8, ge=0, le=MINUTE)


class SessionsSettings(Section):
    isolation: Isolation = Isolation.AUTO
    per_platform: dict[str, Isolation] = {}  # e.g. {slack = "thread", telegram = "chat"}

    def for_platform(self, platform: str) -> Isolation:
        return self.per_platform.get(platform, self.isolation)


class ContextSettings(Section):
    """What a turn reads of the conversation around the bot: unaddressed group messages, the
    earlier messages of a Slack thread it is mentioned in."""

    max_messages: int = Field(default=20, ge=0, le=200)
    max_chars: int = Field(default=4000, ge=200, le=100_000)


class MemorySettings(Section):
    chat_chars: int = Field(default=2000, ge=100, le=1_000_000)
    user_chars: int = Field(default=1200, ge=100, le=1_000_000)


class AccessSettings(Section):
    admins: list[str] = []  # "platform:user_id"
    allowed_users: list[str] = []  # empty: everyone; otherwise "platform:user_id"
    blocked_users: list[str] = []
    # Per-user message budget across all chats; 0 disables.
    rate_limit_per_minute: int = Field(default=30, ge=0, le=1_000_000)
    approvers: Literal["requester_and_admins", "admins"] = "requester_and_admins"
    # Platform roles (Discord role ids) that may use /new and /forget in groups, like admins.
    moderator_roles: list[str] = []
    # People not let in (not admins, not in allowed_users): "refuse" them, or let them "pair":
    # they get a one-time code and the admins Approve/Deny buttons (gateway/intake/pairing.py).
    # With "pair" an empty allowed_users lets in only admins and paired people.
    unknown: Literal["refuse", "pair"] = "refuse"
    pairing_code_minutes: float = Field(default=60.0, gt=0, le=7 * 24 * 60)


class ApprovalSettings(Section):
    timeout_seconds: float = Field(default=300.0, gt=0, le=WEEK)  # no decision by then: deny
    audit_max_entries: int = Field(default=10_000, ge=100, le=100_000_000)
    # Who may press "Always allow in this chat" (a standing grant for one exact call shape):
    # admins, also the requester, or nobody (the button is not shown).
    allow_always: Literal["admins", "requester", "off"] = "admins"
    # Days an "always" grant lasts (shown on the button and in /permissions); 0: until revoked.
    always_expires_days: float = Field(default=30.0, ge=0, le=3650)
    # After outside content (web pages, MCP results, files people sent) enters a turn,
    # calls that change things or send data out wait for a person; "off": they do not.
    after_untrusted: Literal["ask", "off"] = "ask"
    # Seals approvals, answers and grants in the store; empty: a random key kept in
    # `{data_dir}/approvals.key` (0600). With several replicas set the same value on each.
    secret: SecretStr = SecretStr("")


class SchedulerSettings(Section):
    """Reminders and scheduled prompts (gateway/scheduling/scheduler.py)."""

    enabled: bool = True  # false: this process never runs jobs (it may still create them)
    default_timezone: str = "UTC"  # IANA name for times given without one
    # A run late by up to this many seconds (gateway down, overloaded) still fires, once;
    # later than that it is reported to its chat as missed.
    misfire_grace_seconds: float = Field(default=300.0, ge=0, le=WEEK)
    max_jobs_per_chat: int = Field(default=25, ge=1, le=100_000)
    min_interval_seconds: float = Field(default=60.0, gt=0, le=WEEK)
    # The lease of the one process that runs jobs; another takes over within about 4/3 of it.
    leader_ttl: float = Field(default=7.0, ge=1, le=5 * MINUTE)
    # The leader re-reads every job this often.
    resync_seconds: float = Field(default=30.0, gt=0, le=DAY)
    delivery_attempts: int = Field(default=4, ge=1, le=100)
    retry_base_delay: float = Field(default=2.0, ge=0, le=HOUR)
    retry_max_delay: float = Field(default=60.0, ge=0, le=DAY)
    run_log_size: int = Field(default=50, ge=1, le=100_000)  # runs kept per job

    @field_validator("default_timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return known_timezone(value)


class HTTPSettings(Section):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    enabled: bool = True


_config_path = config_file


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
    # `chatgate run`'s event loop: "auto" takes uvloop where it is installed, else asyncio's.
    event_loop: Literal["auto", "uvloop", "asyncio"] = "auto"  # gateway/runtime/event_loop.py
    llm: LLMSettings = LLMSettings()
    redis: RedisSettings = RedisSettings()
    tools: ToolsSettings = ToolsSettings()
    browser: BrowserSettings = BrowserSettings()
    agent: AgentSettings = AgentSettings()
    router: RouterSettings = RouterSettings()
    sessions: SessionsSettings = SessionsSettings()
    context: ContextSettings = ContextSettings()
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
    profiles: ProfilesSettings = ProfilesSettings()
    budgets: BudgetSettings = BudgetSettings()
    otel: OtelSettings = OtelSettings()
    skills: SkillsSettings = SkillsSettings()
    history: HistorySettings = HistorySettings()
    delegation: DelegationSettings = DelegationSettings()
    # The TOML file these settings were read from (`--config`, CHATGATE_CONFIG or
    # ./chatgate.toml), set by `load_settings`; see `started_config`.
    _config_file: Path | None = PrivateAttr(default=None)

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

    @model_validator(mode="after")
    def _references(self) -> Settings:
        problems = profile_problems(
            self.profiles, self.llm.provider_names, list(self.tools.profiles)
        )
        if problems:
            raise ValueError("\n".join(problems))
        return self

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


def named_sections(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> set[str]:
    """The top-level names the TOML file and the CHATGATE_* environment set (`[slack]`,
    CHATGATE_SLACK__BOT_TOKEN or CHATGATE_SLACK: "slack"), lower-case. A section named in
    neither holds only its defaults. An unreadable file names nothing here: `load_settings`
    reports it."""
    env = os.environ if environ is None else environ
    prefix = "CHATGATE_"
    names = {
        key[len(prefix) :].split("__", 1)[0].lower()
        for key in env
        if key.upper().startswith(prefix)
    }
    toml_path = config_path(path)
    if toml_path is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            names.update(key.lower() for key in tomllib.loads(toml_path.read_text("utf-8")))
    return names


# Where deployments keep the environment file beside the config (deploy/chatgate.service:
# /etc/chatgate/env; deploy/compose.yaml: .env).
ENV_FILE_NAMES = ("env", ".env", "chatgate.env")


def started_config(settings: Settings) -> Path | None:
    """The config file `settings` were read from, however it was given (`--config`,
    CHATGATE_CONFIG, ./chatgate.toml), absolute; for settings built without a file, the one
    `config_path()` finds now."""
    path = settings._config_file or config_path()
    return path.expanduser().resolve() if path is not None else None


def config_secrets_files(settings: Settings) -> list[Path]:
    """The started config file and the environment files beside it: what commands must never
    read (they hold the tokens), whether or not they exist yet (a directory of that name, such
    as a virtualenv called `env`, is not one)."""
    config = started_config(settings)
    if config is None:
        return []
    beside = (config.parent / name for name in ENV_FILE_NAMES)
    return [config, *(path for path in beside if not path.is_dir())]


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
    passes the platforms'; see gateway/app/app.py `load_settings`).
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
    # Names are checked against the whole model only: without the platforms' sections a
    # CHATGATE_TELEGRAM__TOKEN would look misspelt.
    env = env_problems(model, os.environ, check_names=sections is not None)
    problems = [problem.line for problem in env]
    token = _config_path.set(toml_path)
    try:
        settings = model(**overrides)
    except ValidationError as exc:
        raise ConfigError(problems + _problem_lines(exc, model, env)) from None
    except SettingsError as exc:  # a value that is not JSON stops pydantic-settings at once
        raise ConfigError(problems or [f"environment: {exc}"]) from None
    finally:
        _config_path.reset(token)
    if problems:
        raise ConfigError(problems)
    settings._config_file = toml_path.expanduser().resolve() if toml_path is not None else None
    return settings


def _problem_lines(exc: ValidationError, model: type[Settings], env: list[EnvProblem]) -> list[str]:
    """One line per error, minus those a misspelt variable already explains."""
    lines: list[str] = []
    for err in exc.errors():
        if not err["loc"] and err["type"] == "value_error":
            # Checks across sections (gateway/config/profiles.py) name their own keys.
            lines.extend(str(err["ctx"]["error"]).splitlines())
        elif not explained(model, _env_loc(err["loc"]), env):
            lines.append(_problem_line(err))
    return lines


def _env_loc(loc: tuple[Any, ...]) -> tuple[str, ...]:
    """An error's location as env names spell it: `[profiles.coding]` lives under `named`."""
    parts = [str(part).lower() for part in loc]
    if parts[:2] == ["profiles", "named"]:
        del parts[1]
    return tuple(parts)


def _problem_line(err: Any) -> str:
    loc = [str(part) for part in err["loc"]]
    if loc[:2] == ["profiles", "named"]:  # [profiles.coding] is stored under `named`
        del loc[1]
    key = ".".join(loc) or "(root)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown setting (check the spelling)"
    value = err.get("input")
    shown = "" if isinstance(value, dict | list) or value is None else f" (got {value!r})"
    if isinstance(value, str) and "://" in value:
        try:
            shown = f" (got {mask_url(value)!r})"
        except ValueError:  # too malformed to find a password in: show nothing
            shown = ""
    if is_secret_name(key):
        shown = ""
    return f"{key}: {msg}{shown}"


MASK = "********"
_DUMPED_SECRET = str(SecretStr("x"))  # how pydantic dumps any non-empty SecretStr


def masked(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain data with every secret masked, for `config show`:
    what gateway/runtime/secrets.py finds for the logs. `SecretStr` values (tokens, API keys, the
    values of llm.extra_headers and of MCP servers' env and headers) dump masked already."""
    data: dict[str, Any] = _mask(settings.model_dump(mode="json"))
    return data


def _mask(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _mask(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_mask(v, key) for v in node]
    if isinstance(node, str) and node and (node == _DUMPED_SECRET or is_secret_name(key)):
        return MASK
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
