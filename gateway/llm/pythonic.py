"""Pythonic tool calls (`[get_weather(city="Paris"), now()]`, Llama 3.2/4 style), read with
`ast`: keyword arguments with literal values only. Nothing is ever evaluated.
"""

from __future__ import annotations

import ast
from typing import Any


class _NotLiteral(Exception):
    pass


def pythonic_calls(source: str, *, allow_bare: bool) -> list[tuple[str, dict[str, Any]]] | None:
    """`[get_weather(city="Paris"), now()]`, read with `ast`: keyword literals only, no eval."""
    source = source.strip()
    if not source or len(source) > 100_000:
        return None
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    node = tree.body
    if isinstance(node, ast.List | ast.Tuple):
        items = node.elts
    elif allow_bare and isinstance(node, ast.Call):
        items = [node]
    else:
        return None
    calls: list[tuple[str, dict[str, Any]]] = []
    try:
        for item in items:
            if not isinstance(item, ast.Call) or item.args:
                return None
            name = _dotted_name(item.func)
            if name is None:
                return None
            arguments: dict[str, Any] = {}
            for keyword in item.keywords:
                if keyword.arg is None:
                    return None
                arguments[keyword.arg] = _literal(keyword.value)
            calls.append((name, arguments))
    except (_NotLiteral, RecursionError):
        return None
    return calls or None


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
