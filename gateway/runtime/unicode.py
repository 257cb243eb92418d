"""Text that can always be encoded: lone surrogates replaced before anything stores or sends it.

A Python string may hold half of a surrogate pair (`json.loads('"\\ud800"')`, a platform
that cut an emoji in two, a model that wrote one); UTF-8 cannot encode it, so the store,
the LLM request and every platform API would fail on it. Text is made valid where it
enters the core: messages (gateway/sdk/messages.py) and model replies (gateway/llm/wire.py).
"""

from __future__ import annotations


def valid_unicode(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD; a split pair (`\\ud83d\\ude00`) is
    joined into its character. Valid text is returned as is, checked at C speed."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
