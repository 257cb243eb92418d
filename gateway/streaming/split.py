"""Where a reply that outgrows one message is cut while it is still being written.

The cut of a text longer than the limit depends only on its first `limit` characters, so
once the text passes the limit the first part is final and can be sent; the rest goes on
in a new message (code fences closed at the cut and reopened after it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.streaming.textsplit import best_cut, open_fence

_FENCE_ROOM = 8  # "\n```" closing a fence at the cut, with a margin


@dataclass(frozen=True)
class Cut:
    head: str  # the finished part, fences closed
    reopen: str  # the fence line (and newline) the next part starts with, or ""
    consumed: int  # characters of the text that `head` used up (separators included)


def cut(text: str, limit: int, measure: Callable[[str], int] = len) -> Cut | None:
    """The first part of `text` when it does not fit in one message; None when it fits."""
    if measure(text) <= limit:
        return None
    # A tenth of the limit fits even when rendering makes text several times longer.
    smallest = max(20, limit // 10)
    budget = max(smallest, min(limit, len(text)) - _FENCE_ROOM)
    while True:
        at = best_cut(text, budget, 0)
        head = text[:at]
        fence = open_fence(head)
        shown = head.rstrip("\n") + "\n```" if fence is not None else head.rstrip()
        size = measure(shown)
        if size <= limit or budget <= smallest:
            break
        # Rendering made it longer (escapes, tags): shrink the budget in proportion.
        budget = max(smallest, int(budget * limit / size * 0.95))
    rest = text[at:]
    skipped = len(rest) - len(rest.lstrip("\n" if fence is not None else None))
    reopen = fence + "\n" if fence is not None else ""
    return Cut(shown, reopen, at + skipped)


def close_fences(text: str) -> str:
    """`text` with a code fence it leaves open closed, so a partial reply renders as code."""
    if open_fence(text) is None:
        return text
    return text.rstrip("\n") + "\n```"
