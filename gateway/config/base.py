"""What every settings section is built from: `Section` (unknown keys are errors) and the
allow/deny `ToolRule` that the tool policy and the agent profiles share."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gateway.config.urls import check_url

# Upper bounds of durations (seconds) and sizes (bytes). Every number in the settings has
# one, far above what a real deployment needs (approvals wait at most a week, one LLM
# request at most an hour ...), so a typo such as 1e12 is refused instead of meaning "never".
MINUTE = 60.0
HOUR = 60 * MINUTE
DAY = 24 * HOUR
WEEK = 7 * DAY
GB = 1_000_000_000

# The TOML file being read while settings are validated, so relative paths in it can be
# resolved against its folder.
config_file: ContextVar[Path | None] = ContextVar("chatgate_config_path", default=None)


def relative_to_config(path: Path) -> Path:
    """`path` as written in the config file: a relative one is relative to the file's folder
    (to the working directory when there is no file)."""
    path = path.expanduser()
    if path.is_absolute():
        return path
    source = config_file.get()
    return (source.parent / path).resolve() if source is not None else path.resolve()


class Section(BaseModel):
    """A settings section: unknown keys are errors, so a misspelt one is never ignored."""

    model_config = ConfigDict(extra="forbid")


class ToolRule(Section):
    """One allow/deny pair of the tool policy; names are tools, `group:<name>` or `*`."""

    allow: list[str] = []  # empty: whatever the earlier layers left
    deny: list[str] = []


def known_timezone(value: str) -> str:
    """A validator body: `value` must be an IANA zone name."""
    from zoneinfo import ZoneInfo

    try:
        ZoneInfo(value)
    except (KeyError, ValueError):
        raise ValueError("unknown timezone; use an IANA name such as Europe/Berlin") from None
    return value


def http_url(value: str, *, empty_ok: bool = False) -> str:
    if empty_ok and not value:
        return value
    if not value:
        raise ValueError("must start with http:// or https://")
    return check_url(value, ("http", "https")).rstrip("/")
