"""Splitting text to a platform's message limit, keeping code fences intact.

Used by the adapters for whole messages and by the streaming core for a reply that
passes the limit while it is being written.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*(```+|~~~+)(.*)$")
# Room kept for the part number "\n(12/12)" and a closing fence.
_NUMBER_ROOM = 12
_FENCE_ROOM = 8
_SENTENCE_END = re.compile(r"[.!?…。](?:[\"')\]]*)\s")


def split_text(text: str, limit: int, *, number: bool = True) -> list[str]:
    """Split text into parts of at most `limit` characters for a platform's message limit.

    Cuts prefer a paragraph break, then a line break, then a sentence end, then a
    space. A cut inside a fenced code block closes the fence at the end of the
    part and reopens it (same language) at the start of the next, so every part
    renders on its own. Parts are numbered "(1/3)" when there is more than one.
    """
    if len(text) <= limit:
        return [text]
    budget = limit - (_NUMBER_ROOM if number else 0) - _FENCE_ROOM
    if budget < 20:
        raise ValueError(f"limit {limit} is too small to split into")
    parts: list[str] = []
    reopen = ""
    rest = text
    while rest:
        source = reopen + rest
        if len(source) <= budget:
            parts.append(source)
            break
        cut = best_cut(source, budget, len(reopen))
        chunk = source[:cut]
        fence = open_fence(chunk)
        if fence is not None:
            chunk = chunk.rstrip("\n") + "\n```"
            reopen = fence + "\n"
            rest = source[cut:].lstrip("\n")
        else:
            reopen = ""
            rest = source[cut:].lstrip()
        if chunk.strip():
            parts.append(chunk.rstrip())
    if number and len(parts) > 1:
        total = len(parts)
        parts = [f"{part}\n({i}/{total})" for i, part in enumerate(parts, 1)]
    return parts


def best_cut(source: str, budget: int, floor: int) -> int:
    window = source[:budget]
    # Anything shorter than a third of the budget would make many tiny parts.
    minimum = max(floor + 1, budget // 3)
    inside_code = open_fence(window) is not None
    separators = ("\n",) if inside_code else ("\n\n", "\n")
    for sep in separators:
        at = window.rfind(sep, minimum)
        if at != -1:
            return at + len(sep)
    if not inside_code:
        ends = [m.end() for m in _SENTENCE_END.finditer(window, minimum)]
        if ends:
            return ends[-1]
        at = window.rfind(" ", minimum)
        if at != -1:
            return at + 1
    return budget


def open_fence(text: str) -> str | None:
    """The opening fence line if `text` ends inside a fenced code block, else None."""
    opener: str | None = None
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if match is None:
            continue
        if opener is None:
            opener = line.strip()
        elif match.group(2).strip() == "":
            opener = None
    return opener
