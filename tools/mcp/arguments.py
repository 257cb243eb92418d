"""Argument models for MCP tools: the server's JSON schema goes to the model (its descriptions
marked as outside content), and the model's arguments are checked against it (jsonschema)
before anything is sent to the server."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
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
    shown_schema: ClassVar[dict[str, Any]] = {"type": "object"}  # what the model sees
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
        schema = copy.deepcopy(cls.shown_schema)
        # Which draft it is matters to the validator here, not to the model; some LLM APIs
        # refuse the key.
        schema.pop("$schema", None)
        return schema


def arguments_model(
    tool: str, input_schema: dict[str, Any], mark: Callable[[str], str] = str
) -> type[MCPArguments]:
    """A model for one tool's arguments; a schema jsonschema cannot use is passed to the model
    as it is and the server alone checks the arguments. `mark` is applied to every
    description in the schema the model sees (the server wrote them)."""
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
    attrs = {
        "input_schema": schema,
        "shown_schema": _marked(schema, mark),
        "validator": validator,
        "__module__": __name__,
    }
    return type(f"MCPArguments_{tool}", (MCPArguments,), attrs)


def _marked(node: Any, mark: Callable[[str], str]) -> Any:
    """A copy of a schema with `mark` applied to each "description" text at any depth (a
    property named "description" is a schema, not a text, and is walked into)."""
    if isinstance(node, dict):
        return {
            key: mark(value)
            if key == "description" and isinstance(value, str)
            else _marked(value, mark)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_marked(item, mark) for item in node]
    return node


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message
