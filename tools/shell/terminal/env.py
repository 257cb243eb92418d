"""The environment commands get: an allowlist of harmless variables plus the ones the
operator names, never a value that carries a secret."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

# Variables every command gets from the gateway's environment (LC_* too).
ALLOWED = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "USER",
        "LOGNAME",
        "SHELL",
        "TMPDIR",
        "COLORTERM",
    }
)
# stdin is /dev/null: anything that prompts would only hang until the timeout.
NON_INTERACTIVE = {
    "GIT_TERMINAL_PROMPT": "0",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "DEBIAN_FRONTEND": "noninteractive",
}
# A password in a URL, with or without a user name; a Slack incoming-webhook URL.
_CARRIES_SECRET = re.compile(r"://[^/\s@]*:[^/\s@]+@|hooks\.slack\.com/", re.IGNORECASE)


def safe_env(
    secrets: Iterable[str] = (),
    base: Mapping[str, str] | None = None,
    passthrough: Iterable[str] = (),
) -> dict[str, str]:
    """The allowed variables of `base` (default: the gateway's environment), minus any value
    that holds a configured secret or credentials, plus the non-interactive defaults."""
    source = os.environ if base is None else base
    wanted = ALLOWED | set(passthrough)
    values = [s for s in secrets if s]
    env: dict[str, str] = {}
    for name, value in source.items():
        if name not in wanted and not name.startswith("LC_"):
            continue
        if name.upper().startswith("CHATGATE_") or _CARRIES_SECRET.search(value):
            continue
        # Equal to a secret, or containing a long one ("Bearer <token>").
        if any(value == s or (len(s) >= 8 and s in value) for s in values):
            continue
        env[name] = value
    env.update(NON_INTERACTIVE)
    return env
