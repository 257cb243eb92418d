"""Find every secret in the settings, so logs can redact them and child processes never get them.

A secret is a `SecretStr` value, the password inside a URL (`redis://:pw@host`), or a
string under a key whose name says it is one (`token`, `api_key`, `Authorization` ...),
as in the headers and environment given to MCP servers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr

# A key containing one of these (case-insensitively) holds a secret.
SECRET_WORDS = ("token", "secret", "api_key", "apikey", "password", "authorization", "cookie")


def is_secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


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
