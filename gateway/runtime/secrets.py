"""Find every secret in the settings, so logs and errors can redact them and child processes
never get them; `SecretRedactor` is the one place a text has them replaced.

A secret is a `SecretStr` value, the password inside a URL (`redis://:pw@host`), or a
string under a key whose name says it is one (`token`, `api_key`, `Authorization` ...),
as in the headers and environment given to MCP servers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

# A key containing one of these (case-insensitively) holds a secret.
SECRET_WORDS = ("token", "secret", "api_key", "apikey", "password", "authorization", "cookie")


def is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


class SecretRedactor:
    """Replaces the given secrets, and any bearer token, with `***` (log lines, error details)."""

    _BEARER = re.compile(r"(?i)(bearer\s+)[^\s\"',]+")

    def __init__(self, secrets: Iterable[str]) -> None:
        # Short values are skipped: replacing "1" everywhere would garble text, not protect it.
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if len(s) >= 6}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return self._BEARER.sub(r"\1***", text)


def secret_values(settings: object) -> list[str]:
    """Every secret string in a settings object (or any model, mapping or list), deduplicated."""
    return list(dict.fromkeys(value for value in _walk(settings, "") if value))


def _walk(node: object, key: str) -> Iterator[str]:
    if isinstance(node, SecretStr):
        yield node.get_secret_value()
        yield _bearer_value(node.get_secret_value())  # an MCP server's Authorization header
    elif isinstance(node, BaseModel):
        for name in type(node).model_fields:
            yield from _walk(getattr(node, name), name)
    elif isinstance(node, Mapping):
        for name, value in node.items():
            if isinstance(name, SecretStr):  # tables keyed by a secret (web.chat_tokens, api.keys)
                yield name.get_secret_value()
            yield from _walk(value, str(name))
    elif isinstance(node, list | tuple):
        for value in node:
            yield from _walk(value, key)
    elif isinstance(node, str):
        if is_secret_name(key):
            yield _bearer_value(node)
            yield node
        if "://" in node:
            password = urlsplit(node).password
            if password:
                yield password


def _bearer_value(value: str) -> str:
    """`Bearer abc` -> `abc`, so the token is found wherever it appears without its scheme."""
    scheme, _, rest = value.partition(" ")
    return rest if scheme.lower() in ("bearer", "bot", "token", "basic") and rest else ""
