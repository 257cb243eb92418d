"""The line a streamed reply shows for a tool call while it runs ("Running shell: `ls -la`").

Arguments are shortened to one line and secrets never appear: configured secret values,
`key=value` pairs whose key names a secret, bearer tokens, URL passwords and well-known
token shapes are replaced with `***` before anything is shortened.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from gateway.llm import lenient_json
from gateway.llm.types import ToolCall
from gateway.runtime.secrets import is_secret_name
from gateway.sdk.tooling import ToolSpec

MAX_VALUE = 60  # characters of an argument shown
MAX_LINE = 160
# The argument that says most about a call, in order of preference.
_MAIN_KEYS = ("command", "path", "url", "query", "pattern", "name", "task", "question", "text")

_ASSIGNED = re.compile(
    r"(?i)\b([\w.-]*(?:token|secret|passw(?:or)?d|pwd|api[_-]?key|apikey|authorization|cookie)"
    r"[\w.-]*)(\s*[=:]\s*|\s+)(\"[^\"]*\"|'[^']*'|[^\s&;,`'\"]+)"
)
_SCHEMES = re.compile(r"(?i)\b(bearer|basic|token|bot)(\s+)[A-Za-z0-9._~+/=:-]{8,}")
_URL_PASSWORD = re.compile(r"(\b[a-z][\w+.-]*://[^/\s:@]*):[^@\s/]+@", re.IGNORECASE)
_TOKEN_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{16,}|sk_(?:live|test)_\w{16,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|xapp-[A-Za-z0-9-]{10,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|glpat-[\w-]{20,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}|\d{6,12}:[A-Za-z0-9_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)


class SecretScrubber:
    """Replaces secrets in text shown to people; `secrets` are the configured values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Short values are skipped: replacing "1" everywhere would garble, not protect.
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = _URL_PASSWORD.sub(r"\1:***@", text)
        text = _SCHEMES.sub(r"\1\2***", text)
        text = _ASSIGNED.sub(r"\1\2***", text)
        return _TOKEN_SHAPES.sub("***", text)


def describe_call(
    call: ToolCall, spec: ToolSpec[Any] | None, scrub: SecretScrubber, *, verbose: bool
) -> str:
    """One line for a tool call: the tool's own description if it has one, else its main
    argument (or, verbose, every argument)."""
    args = _arguments(call.arguments)
    line = None
    if spec is not None and spec.progress is not None and not verbose:
        try:
            line = spec.progress(spec.args.model_validate(args))
        except Exception:  # a description must never fail a turn; the generic one will do
            line = None
    if line is None:
        shown = _all_arguments(args, scrub) if verbose else _main_argument(args, scrub)
        line = f"Running {call.name}: {shown}" if shown else f"Running {call.name}"
    return _shorten(" ".join(scrub(line).split()), MAX_LINE)


def _arguments(raw: str) -> dict[str, Any]:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        try:
            value = lenient_json.loads(raw)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _main_argument(args: dict[str, Any], scrub: SecretScrubber) -> str:
    for key in _MAIN_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _code(scrub(value))
    for key, value in args.items():
        if isinstance(value, str) and value.strip() and not is_secret_name(key):
            return _code(scrub(value))
    return ""


def _all_arguments(args: dict[str, Any], scrub: SecretScrubber) -> str:
    parts = []
    for key, value in args.items():
        if is_secret_name(key):
            shown = "***"
        elif isinstance(value, str):
            shown = _code(scrub(value))
        else:
            shown = _code(scrub(json.dumps(value, ensure_ascii=False)))
        parts.append(f"{key}={shown}")
    return ", ".join(parts)


def inline_code(value: str) -> str:
    """A value for a progress line: inline code on one line, shortened, so whatever the
    model wrote (Markdown, newlines) shows as written. Tools use it in `ToolSpec.progress`."""
    return _code(value)


def _code(value: str) -> str:
    """A value as inline code on one line; backticks inside would end the code early."""
    one_line = " ".join(value.replace("`", "'").split())
    return f"`{_shorten(one_line, MAX_VALUE)}`"


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
