"""JSON from requests, bounded: a body that is not UTF-8, not JSON, or nested deeper than any
real payload is refused with a ValueError the caller answers with a 4xx, never a RecursionError
(Python's parser gives up near 1,000 levels, and code walking a body a little less deep may
not)."""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # Slack's, Telegram's and OpenAI-style payloads nest a dozen levels at most


def parse_json(raw: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The parsed body; ValueError when it is not UTF-8 JSON nested at most `max_depth` deep."""
    try:
        value = json.loads(raw)
    except RecursionError:
        raise ValueError(f"the JSON is nested more than {max_depth} levels deep") from None
    # UnicodeDecodeError and JSONDecodeError are ValueErrors already.
    # Each level opens a bracket: a body with no more of them than max_depth cannot nest
    # deeper, and is not walked (the walk cost a webhook call more than its parse).
    if _brackets(raw) > max_depth and too_deep(value, max_depth):
        raise ValueError(f"the JSON is nested more than {max_depth} levels deep")
    return value


def _brackets(raw: bytes | str) -> int:
    if isinstance(raw, str):
        return raw.count("{") + raw.count("[")
    return raw.count(b"{") + raw.count(b"[")


def too_deep(value: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether lists and objects in `value` nest more than `max_depth` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
