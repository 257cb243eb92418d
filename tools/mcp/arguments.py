"""Argument models for MCP tools: the server's JSON schema goes to the model unchanged, and the
model's arguments are checked against it (jsonschema) before anything is sent to the server."""

from __future__ import annotations

import copy
import logging
from typing import Any, ClassVar

import jsonschema
from jsonschema.exceptions import SchemaError
from pydantic import GetJsonSchemaHandler, RootModel, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

log = logging.getLogger(__name__)

_MAX_ERRORS = 5


class MCPArguments(RootModel[dict[str, Any]]):
    """The arguments of one MCP tool call, as the JSON object the server receives.

    Subclasses made by `arguments_model` carry the tool's schema; the agent validates the
    model's call through `model_validate` like any tool's arguments.
    """

    input_schema: ClassVar[dict[str, Any]] = {"type": "object"}
    validator: ClassVar[Any] = None  # a jsonschema validator, or None to leave it to the server

    @model_validator(mode="before")
    @classmethod
    def _check(cls, data: Any) -> Any:
        if cls.validator is None:
            return data
        errors = sorted(cls.validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            raise ValueError("; ".join(_describe(e) for e in errors[:_MAX_ERRORS]))
        return data

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = copy.deepcopy(cls.input_schema)
        # Which draft it is matters to the validator here, not to the model; some LLM APIs
        # refuse the key.
        schema.pop("$schema", None)
        return schema


def arguments_model(tool: str, input_schema: dict[str, Any]) -> type[MCPArguments]:
    """A model for one tool's arguments; a schema jsonschema cannot use is passed to the model
    as it is and the server alone checks the arguments."""
    schema = dict(input_schema) or {"type": "object"}
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    validator: Any = None
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
        validator = cls(schema)
    except SchemaError as exc:
        log.warning("mcp tool schema not checkable tool=%s error=%s", tool, exc.message)
    attrs = {"input_schema": schema, "validator": validator, "__module__": __name__}
    return type(f"MCPArguments_{tool}", (MCPArguments,), attrs)


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
