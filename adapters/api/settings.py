"""The `[api]` section: keys for the OpenAI-compatible API at /v1, and how it waits."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_serializer, field_validator, model_validator

from gateway.sdk import Section
from gateway.sdk.webkit import check_name, masked_keys

_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,63}$")


class ApiSettings(Section):
    # API key -> user name; the key's requests come from `api:<name>`.
    keys: dict[SecretStr, str] = {}
    # The model name clients send and /v1/models lists: the profile the bindings choose.
    model: str = "chatgate"
    # More model names, each running a profile of [profiles.<name>]: model name -> profile.
    models: dict[str, str] = {}
    # A tool call that needs approval: "wait" keeps the response open until an operator
    # decides; "pending" answers at once with a notice (the outcome comes with the next reply).
    approval_wait: Literal["wait", "pending"] = "wait"
    # A response waits at most this long for its turn; then it says the answer comes later.
    timeout_seconds: float = Field(default=900.0, gt=0, le=86400)
    # The largest request body taken (images come inside it, base64-encoded).
    max_request_mb: float = Field(default=20.0, gt=0, le=200)

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: dict[SecretStr, str]) -> dict[SecretStr, str]:
        for key, name in value.items():
            check_name(name, "api user")
            if len(key.get_secret_value()) < 16:
                raise ValueError(f"api key of {name}: use at least 16 characters")
        return value

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        return _model_name(value)

    @field_validator("models")
    @classmethod
    def _models(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            _model_name(name)
        return value

    @model_validator(mode="after")
    def _distinct(self) -> ApiSettings:
        if self.model in self.models:
            raise ValueError(f"models: {self.model!r} is already api.model (the bound profile)")
        return self

    def profile_of(self, model: str) -> str | None:
        """The profile a model name runs (None: the bindings decide); KeyError: unknown."""
        if model == self.model:
            return None
        return self.models[model]


def _model_name(value: str) -> str:
    if not _MODEL.match(value):
        raise ValueError(f"model name {value!r}: use letters, digits and . _ : / - (at most 64)")
    return value

    @field_serializer("keys", when_used="json")
    def _masked(self, value: dict[SecretStr, str]) -> dict[str, str]:
        return masked_keys(value)
