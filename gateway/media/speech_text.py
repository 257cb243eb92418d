"""The agent's Markdown as text worth reading aloud: code and markup left out, length capped."""

from __future__ import annotations

import re

# OpenAI's /audio/speech takes at most 4096 characters of input.
MAX_SPEECH_CHARS = 4096

_FENCED = re.compile(r"^[ \t]*(```+|~~~+).*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_LINK = re.compile(r"\[([^\]\n]+)\]\([^)\s]+\)")
_URL = re.compile(r"https?://\S+")
_MARKS = re.compile(r"(\*\*|__|~~|`+|^\s{0,3}#{1,6}\s+|^\s*>\s?|^\s*[-*+]\s+(?=\S))", re.M)
_SPACES = re.compile(r"[ \t]+")
_SENTENCE_END = re.compile(r"[.!?…](?=\s)")


def speakable(markdown: str, limit: int = MAX_SPEECH_CHARS) -> str:
    text = _FENCED.sub(" (code omitted) ", markdown)
    text = _LINK.sub(r"\1", text)
    text = _URL.sub("(link)", text)
    text = _MARKS.sub("", text)
    text = "\n".join(_SPACES.sub(" ", line).strip() for line in text.splitlines())
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(cut)]
    return cut[: ends[-1]] if ends and ends[-1] > limit // 2 else cut.rsplit(" ", 1)[0]
