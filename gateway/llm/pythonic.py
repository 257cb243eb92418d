"""Pythonic tool calls (`[get_weather(city="Paris"), now()]`, Llama 3.2/4 style), read with
`ast`: keyword arguments with literal values only. Nothing is ever evaluated.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

_MAX_SOURCE = 100_000
_MAX_SALVAGE_ITEMS = 32
_MAX_WIDEN = 4
# Where a call can start inside a list: right after the `[` or after a comma.
_ITEM_START = re.compile(r"(?:^\[|,)\s*(?=[A-Za-z_][\w.]*\s*\()")


class _NotLiteral(Exception):
    pass


Call = tuple[str, dict[str, Any]]


def pythonic_calls(source: str, *, allow_bare: bool) -> list[Call] | None:
    """`[get_weather(city="Paris"), now()]`, read with `ast`: keyword literals only, no eval.

    A call that cannot be read (a bytes argument, a broken quote) is dropped and its siblings
    kept, as long as at least one call in the list can be read.
    """
    source = source.strip()
    if not source or len(source) > _MAX_SOURCE:
        return None
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _salvage(source)
    node = tree.body
    if isinstance(node, ast.List | ast.Tuple):
        items = node.elts
    elif allow_bare and isinstance(node, ast.Call):
        items = [node]
    else:
        return None
    if not items:
        return None
    calls: list[Call] = []
    for item in items:
        if not isinstance(item, ast.Call):
            return None  # a list of other things is data, not calls
        call = _read_call(item)
        if call is not None:
            calls.append(call)
    return calls or None


def _salvage(source: str) -> list[Call] | None:
    """A list that is not valid Python as a whole: read each call in it on its own."""
    if not (source.startswith("[") and source.endswith("]")):
        return None
    items = list(_ITEM_START.finditer(source))
    if not items or len(items) > _MAX_SALVAGE_ITEMS:
        return None
    starts = [item.end() for item in items]
    ends = [item.start() for item in items[1:]] + [len(source) - 1]  # the comma or the `]`
    calls: list[Call] = []
    i = 0
    while i < len(starts):
        # A comma inside a string cuts a call in two: widen the piece a little until it reads.
        for j in range(i, min(i + _MAX_WIDEN, len(starts))):
            call = _read_source(source[starts[i] : ends[j]])
            if call is not None:
                calls.append(call)
                i = j + 1
                break
        else:
            i += 1
    return calls or None


def _read_source(piece: str) -> Call | None:
    try:
        node = ast.parse(piece.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return _read_call(node) if isinstance(node, ast.Call) else None


def _read_call(item: ast.Call) -> Call | None:
    if item.args:
        return None
    name = _dotted_name(item.func)
    if name is None:
        return None
    arguments: dict[str, Any] = {}
    try:
        for keyword in item.keywords:
            if keyword.arg is None:
                return None
            arguments[keyword.arg] = _literal(keyword.value)
    except (_NotLiteral, RecursionError):
        return None
    return name, arguments


def _dotted_name(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    name = ".".join(reversed(parts))
    # Llama's built-in tools are written `brave_search.call(query=...)`.
    return name.removesuffix(".call")


_NAMED_CONSTANTS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "none": None,
    "True": True,
    "False": False,
    "None": None,
}


def _literal(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bytes | complex) or node.value is Ellipsis:
            raise _NotLiteral
        if isinstance(node.value, float) and not math.isfinite(node.value):
            raise _NotLiteral  # 1e999: no JSON encoder could send it on
        return node.value
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise _NotLiteral
            result[str(_literal(key))] = _literal(value)
        return result
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand)
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise _NotLiteral
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Name) and node.id in _NAMED_CONSTANTS:
        return _NAMED_CONSTANTS[node.id]
    raise _NotLiteral
