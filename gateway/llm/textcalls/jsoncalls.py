"""Tool calls written as JSON objects, in every key spelling the model families use: Hermes
and Qwen (`name`/`arguments`), Llama 3 (`parameters`), Command R (`tool_name`), OpenAI's own
shape pasted as text, and llama.cpp's generic `{"tool_calls": [...]}` wrapper.
"""

from __future__ import annotations

import json
from typing import Any

from gateway.llm.lenient_json import LenientJSONError, skip_ws
from gateway.llm.lenient_json import loads as loads_lenient
from gateway.llm.textcalls.model import NAME, Calls, Context, ParsedCall

_NAME_KEYS = ("name", "tool_name", "tool", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input", "params")
_META_KEYS = frozenset({"id", "type", "index", "call_id", "tool_call_id"})
_STRICT_KEYS = frozenset(_NAME_KEYS) | frozenset(_ARG_KEYS) | _META_KEYS
_CONTAINER_KEYS = ("tool_calls", "tool_call", "function_calls")


def json_calls(text: str, pos: int, ctx: Context, *, strict: bool) -> tuple[Calls, int] | None:
    """Calls written as JSON values one after another (`;`, `,` or line breaks between them).

    Returns the calls and where the last one ends, or None when the first value is not a call.
    """
    calls: Calls = []
    end = pos
    i = pos
    while True:
        i = skip_ws(text, i)
        if i >= len(text) or text[i] not in "{[":
            break
        read = ctx.read(text, i)
        if read is None:
            break
        found = calls_from_json(read[0], strict=strict)
        if not found:
            break
        calls.extend(found)
        end = read[1]
        i = skip_ws(text, end)
        if i < len(text) and text[i] in ";,":
            i += 1
    return (calls, end) if calls else None


def only_separators(text: str, pos: int) -> bool:
    """Nothing but whitespace, `;` and `,` from `pos` to the end."""
    return not text[pos:].strip(" \t\r\n;,")


def calls_from_json(value: Any, *, strict: bool) -> Calls | None:
    """The calls in one JSON value (an object or a list of them); None if any item is not one.

    Strict is for JSON with no markup around it: each object must hold a name and an
    arguments key and nothing else, so `{"name": "Ana", "age": 3}` in an answer is never a call.
    """
    if isinstance(value, dict):
        container = [k for k in _CONTAINER_KEYS if k in value]
        if len(container) == 1 and set(value) <= {container[0], *_META_KEYS}:
            value = value[container[0]]
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls: Calls = []
    for item in items:
        call = call_from_object(item, strict=strict)
        if call is None:
            return None
        calls.append(call)
    return calls


def call_from_object(obj: Any, *, strict: bool) -> ParsedCall | None:
    """One call object in any of the usual spellings; None if it is not one."""
    if not isinstance(obj, dict):
        return None
    function = obj.get("function")
    if isinstance(function, dict):  # OpenAI's own shape, pasted as text
        if strict and not set(obj) <= _META_KEYS | {"function"}:
            return None
        return call_from_object(function, strict=strict)
    name_key = next((k for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    if name_key is None:
        return None
    name = obj[name_key].strip()
    if not NAME.fullmatch(name):
        return None
    args_key = next((k for k in _ARG_KEYS if k in obj), None)
    if strict and (args_key is None or not set(obj) <= _STRICT_KEYS):
        return None
    if args_key is None:
        # Small models sometimes inline the arguments next to the name.
        inline = {k: v for k, v in obj.items() if k != name_key and k not in _META_KEYS}
        return ParsedCall(name, inline)
    arguments = arguments_from(obj[args_key], strict=strict)
    return None if arguments is None else ParsedCall(name, arguments)


def arguments_from(raw: Any, *, strict: bool) -> dict[str, Any] | str | None:
    """The arguments as an object when they are one, or a JSON string holding one.

    Anything else (a plain string, a list) is kept as written where markup says this is a
    call, so the agent can tell the model to send an object; in bare JSON it means not a call.
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        stripped = raw.strip()
        if not stripped:
            return {}
        if stripped[0] == "{":
            try:
                value = loads_lenient(stripped)
            except LenientJSONError:
                value = None
            if isinstance(value, dict):
                return value
        return None if strict else raw
    return None if strict else json.dumps(raw, ensure_ascii=False)


def named_object(name: str, text: str, pos: int, ctx: Context) -> tuple[ParsedCall, int] | None:
    """A name written outside the object (`name{...}`, `call:name{...}`): read the object."""
    if not NAME.fullmatch(name):
        return None
    read = ctx.read(text, pos)
    if read is None or not isinstance(read[0], dict):
        return None
    return ParsedCall(name, read[0]), read[1]
