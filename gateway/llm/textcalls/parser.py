"""`parse`: reasoning first, then calls announced by markup, then (only when there were none)
calls written with no markup at all; whatever is left is the visible content."""

from __future__ import annotations

import logging
from collections.abc import Collection

from gateway.llm.textcalls.markup import extract_marked
from gateway.llm.textcalls.model import Context, ParsedReply, join_pieces
from gateway.llm.textcalls.prose import prose_calls
from gateway.llm.textcalls.reasoning import split_reasoning

log = logging.getLogger("gateway.llm.textcalls")

# Tokens that frame the visible answer (Command R7B) or end the turn; never part of the text.
_FRAME_TOKENS = ("<|START_RESPONSE|>", "<|END_RESPONSE|>")
_END_TOKENS = (
    "<|eot_id|>",
    "<|eom_id|>",
    "<|im_end|>",
    "<|END_OF_TURN_TOKEN|>",
    "<end_of_turn>",
    "<turn|>",
    "</s>",
    "<｜end▁of▁sentence｜>",
    "<|end|>",
    "<|return|>",
)


def parse(text: str, *, names: Collection[str] | None = None) -> ParsedReply:
    """Split model output into content, tool calls and reasoning.

    `names`, when given, are the tools that were offered: the ambiguous formats (bare JSON,
    pythonic lists, fenced blocks) only count as calls when they name one of them, and a few
    (pythonic calls in prose, Python fences) count only then. Explicit markup such as
    `<tool_call>` always counts, so the caller can tell the model a name is wrong.
    """
    try:
        return _parse(text, names)
    except Exception:  # a parser bug must not fail the user's turn; the text is still shown
        log.warning("textcalls parse failed; keeping the reply as plain text", exc_info=True)
        stripped = text.strip()
        return ParsedReply(content=stripped or None)


def _parse(text: str, names: Collection[str] | None) -> ParsedReply:
    body, reasoning = split_reasoning(text)
    body = _without_frame_tokens(body)
    ctx = Context(names, len(body))
    pieces, calls = extract_marked(body, ctx)
    if not calls:
        unmarked = prose_calls(body, ctx)
        if unmarked is None:
            return ParsedReply(content=body.strip() or None, reasoning=reasoning)
        pieces, calls = unmarked
    content = join_pieces(pieces).strip()
    if content.startswith("all\n") and ">>>" in body:
        # Functionary v3.2 opens plain text with `all`: a channel name, not a word.
        content = content[4:].strip()
    return ParsedReply(content=content or None, calls=calls, reasoning=reasoning)


def _without_frame_tokens(body: str) -> str:
    for token in _FRAME_TOKENS:
        if token in body:
            body = body.replace(token, "")
    trimmed = body.rstrip()
    while trimmed.endswith(_END_TOKENS):
        token = next(t for t in _END_TOKENS if trimmed.endswith(t))
        trimmed = trimmed[: -len(token)].rstrip()
    return trimmed if len(trimmed) != len(body.rstrip()) else body
