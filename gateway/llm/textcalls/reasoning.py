"""Split a reply's reasoning blocks from the rest, in every spelling the open models use:
`<think>`, `<thinking>`, Seed's `<seed:think>`, Magistral's `[THINK]`, Command R7B's
`<|START_THINKING|>` and Gemma 4's `<|channel>thought`.
"""

from __future__ import annotations

import re

REASONING_TAGS = {
    "<think>": "</think>",
    "<thinking>": "</thinking>",
    "<seed:think>": "</seed:think>",
    "[THINK]": "[/THINK]",
    "<|START_THINKING|>": "<|END_THINKING|>",
    "<|channel>thought": "<channel|>",
}
"""Each opening tag of a reasoning block and the tag that closes it."""
# Closers that may appear alone: the chat template opened the block before the reply began.
STRAY_CLOSERS = ("</think>", "</thinking>", "</seed:think>", "[/THINK]", "<|END_THINKING|>")
_OPEN = re.compile("|".join(re.escape(opening) for opening in REASONING_TAGS))
_ORPHAN_CLOSE = re.compile("|".join(re.escape(closer) for closer in STRAY_CLOSERS))


def split_reasoning(text: str) -> tuple[str, str | None]:
    """Remove reasoning blocks; return the rest and the reasoning (None if there was none).

    A closing tag with no opening one means the output began mid-thought (the chat template
    opened the block), so everything before it is reasoning. An unclosed block runs to the end.
    """
    reasoning: list[str] = []
    first_close = _ORPHAN_CLOSE.search(text)
    if first_close:
        first_open = _OPEN.search(text, 0, first_close.start())
        if first_open is None:
            reasoning.append(text[: first_close.start()])
            text = text[first_close.end() :]
    kept: list[str] = []
    pos = 0
    while True:
        opening = _OPEN.search(text, pos)
        if opening is None:
            kept.append(text[pos:])
            break
        if _quoted(text, opening.start()):
            kept.append(text[pos : opening.end()])
            pos = opening.end()
            continue
        kept.append(text[pos : opening.start()])
        closer = REASONING_TAGS[opening.group()]
        closing = text.find(closer, opening.end())
        if closing < 0:
            reasoning.append(text[opening.end() :])
            break
        reasoning.append(text[opening.end() : closing])
        pos = closing + len(closer)
    return "".join(kept), _join(reasoning)


def _join(parts: list[str]) -> str | None:
    joined = "\n\n".join(p.strip() for p in parts if p.strip())
    return joined or None


def _quoted(text: str, pos: int) -> bool:
    """A tag written in inline code (`<think>`) is being talked about, not used."""
    return pos > 0 and text[pos - 1] == "`"
