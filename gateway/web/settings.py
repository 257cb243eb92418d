"""The `[web]` section: who may sign in to the operator console (/admin) and the web chat
(/chat), and how long a browser stays signed in."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from pydantic import Field, SecretStr, field_serializer, field_validator, model_validator

from gateway.config import Section

# Names become addresses (`web:alice`) and chat ids, so no ':' or spaces.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
MIN_TOKEN = 16
ADMIN = "admin"  # the operator name `web.admin_token` signs in as


def check_name(name: str, what: str) -> str:
    if not NAME.match(name):
        raise ValueError(
            f"{what} {name!r}: use letters, digits, '.', '_' and '-' (at most 64, no spaces)"
        )
    return name


def _check_token(token: str, what: str) -> None:
    if len(token) < MIN_TOKEN:
        raise ValueError(f"{what}: a token needs at least {MIN_TOKEN} characters")


class WebSettings(Section):
    # Signs in to /admin (and /chat) as the operator "admin"; empty: no admin token.
    admin_token: SecretStr = SecretStr("")
    # More operators, each with a token of their own: name -> token.
    operators: dict[str, SecretStr] = {}
    # Web chat people: token -> user name (their address is `web:<name>`).
    chat_tokens: dict[SecretStr, str] = {}
    session_hours: float = Field(
        default=12.0, gt=0, le=24 * 90
    )  # a browser stays signed in this long
    # The address people reach the gateway at, e.g. https://bot.example.com: sign-in links
    # use it, and with https cookies are marked Secure.
    public_url: str = ""
    signin_attempts_per_minute: int = Field(default=10, ge=1, le=10_000)  # per client address
    # Reverse proxies (addresses or networks) whose X-Forwarded-For names the client; without
    # them every client behind a proxy shares the proxy's sign-in limit.
    trusted_proxies: list[str] = Field(default=[], max_length=100)
    link_hours: float = Field(
        default=24.0, gt=0, le=24 * 30
    )  # a one-time sign-in link lasts this long
    max_upload_mb: float = Field(default=10.0, gt=0, le=1000)  # a file sent in the web chat
    chat: bool = True  # false: only the console; the web chat stays off

    @field_validator("operators")
    @classmethod
    def _operators(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for name, token in value.items():
            check_name(name, "operator")
            _check_token(token.get_secret_value(), f"operator {name}")
        return value

    @field_validator("chat_tokens")
    @classmethod
    def _chat_tokens(cls, value: dict[SecretStr, str]) -> dict[SecretStr, str]:
        for token, name in value.items():
            check_name(name, "chat user")
            _check_token(token.get_secret_value(), f"chat user {name}")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _trusted_proxies(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network") from None
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _distinct(self) -> WebSettings:
        admin = self.admin_token.get_secret_value()
        if admin:
            _check_token(admin, "admin_token")
        if ADMIN in self.operators and admin:
            raise ValueError(f"operators: {ADMIN!r} is the name admin_token signs in as")
        tokens = [admin] if admin else []
        tokens += [t.get_secret_value() for t in self.operators.values()]
        tokens += [t.get_secret_value() for t in self.chat_tokens]
        if len(tokens) != len(set(tokens)):
            raise ValueError("every admin, operator and chat token must be different")
        return self

    @field_serializer("chat_tokens", when_used="json")
    def _masked_tokens(self, value: dict[SecretStr, str]) -> dict[str, str]:
        return masked_keys(value)

    @property
    def console_enabled(self) -> bool:
        return bool(self.admin_token.get_secret_value() or self.operators)

    @property
    def chat_enabled(self) -> bool:
        return self.chat and bool(self.console_enabled or self.chat_tokens)

    @property
    def proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        return tuple(ipaddress.ip_network(entry, strict=False) for entry in self.trusted_proxies)

    @property
    def secure_cookies(self) -> bool:
        return self.public_url.startswith("https://")


def masked_keys(value: dict[SecretStr, Any]) -> dict[str, Any]:
    """A table keyed by secrets, for `config show` (which dumps settings as JSON): the keys
    masked, the values kept."""
    return {f"******** ({i})": name for i, name in enumerate(value.values(), 1)}
