"""The base class for tool argument models: a lean JSON schema, because every byte of it is sent
to the model on every LLM call.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

# Keys whose value maps names to sub-schemas (so a property literally called "title" survives).
_NAMED_SCHEMAS = ("properties", "$defs", "definitions", "patternProperties")


class ToolArgs(BaseModel):
    """Arguments of one tool. Unknown fields are ignored: small models often add extras."""

    model_config = ConfigDict(extra="ignore")

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        return lean_schema(super().model_json_schema(*args, **kwargs))


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop titles, inline `$ref`s and collapse `X | None` to `X`.

    Titles repeat the property names; `$ref` indirection confuses small models; an
    optional field is expressed by leaving it out of `required`, not by a null branch.
    """
    defs: dict[str, Any] = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            target = walk(defs[ref.rsplit("/", 1)[1]])
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                out[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                out[key] = walk(value)
        branches = out.get("anyOf")
        if isinstance(branches, list) and len(branches) == 2 and {"type": "null"} in branches:
            (kept,) = [b for b in branches if b != {"type": "null"}]
            del out["anyOf"]
            out = {**kept, **out}
            if out.get("default", ...) is None:
                del out["default"]
        return out

    result: dict[str, Any] = walk(schema)
    return result
