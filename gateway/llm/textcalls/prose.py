"""Calls written with no markup: JSON call objects in or as the reply (Llama 3, xLAM, Hermes'
bare JSON), pythonic lists (Llama 3.2/4) and Functionary's unmarked first call.

These are ambiguous, so they count only in their strict shape, only for offered tools when
the names are known, and never where the text shows them: in inline code, inside a fenced
block that is not a call, or right after words like "for example".
"""

from __future__ import annotations

import re
from bisect import bisect_right

from gateway.llm.pythonic import pythonic_calls
from gateway.llm.textcalls.jsoncalls import calls_from_json, only_separators
from gateway.llm.textcalls.model import CUT, Calls, Context, ParsedCall, Pieces

# An object whose first key is one a call object can start with; `{` first, so the regex
# engine can skip ahead to it in C.
_JSON_CANDIDATE = re.compile(
    r"""\{\s*["']?(?:name|tool_name|function|tool|arguments|parameters|type|id|tool_calls?)"""
    r"""["']?\s*:"""
)
_PYTHON_LIST = re.compile(r"\[\s*([A-Za-z_][\w.]*)\s*\(")
_PYTHON_TOKEN = re.compile(r"""[\[\](){}"']""")
_PYTHON_STRING_END = {
    '"': re.compile(r'(?:[^"\\\n]|\\.)*"'),
    "'": re.compile(r"(?:[^'\\\n]|\\.)*'"),
}
# A Python-level step costs about as much as reading this many characters; a candidate
# skipped at a glance (not offered, inside a fence) costs a few steps.
_TOKEN_COST = 64
_SKIP_COST = 4 * _TOKEN_COST
_FUNCTIONARY_START = re.compile(r"([A-Za-z_][\w.\-]{0,127})\n(?=\s*\{)")
# Words that introduce a call as an illustration, or recount one made before.
_EXAMPLE = re.compile(
    r"(?i)\bfor (?:example|instance)\b|\be\.g\.|\bexamples?\b|\bsuch as\b|\bsamples?\b"
    r"|\bsyntax\b|\b(?:called|invoked|used|ran)\b"
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_MAX_PYTHON_LIST = 20_000  # a pythonic list in prose longer than this is not a call

Span = tuple[int, int, Calls]


def prose_calls(text: str, ctx: Context) -> tuple[Pieces, Calls] | None:
    """The unmarked calls in `text` with the text around them, or None if there are none."""
    whole = _whole_reply(text.strip(), ctx)
    if whole:
        return [CUT], whole
    fences = _fence_bounds(text)
    spans = _json_spans(text, ctx, fences)
    if ctx.names is not None:
        # Pythonic calls in prose look too much like code being shown to count unnamed.
        spans += _python_spans(text, ctx, fences)
    if not spans:
        return None
    pieces: Pieces = []
    calls: Calls = []
    pos = 0
    for start, end, found in sorted(spans, key=lambda span: span[0]):
        if start < pos:
            continue
        pieces.extend((text[pos:start], CUT))
        calls.extend(found)
        pos = end
    pieces.append(text[pos:])
    return pieces, calls


def in_inline_code(text: str, pos: int) -> bool:
    """Markup or JSON inside `inline code` is being talked about, not used."""
    line_start = text.rfind("\n", max(0, pos - 200), pos) + 1
    return text.count("`", max(line_start, pos - 200), pos) % 2 == 1


def looks_shown(text: str, start: int) -> bool:
    """The sentence leading to `start` shows a call rather than makes one ("for example",
    "syntax", "I called")."""
    head = text[max(0, start - 240) : start]
    line_start = head.rfind("\n")
    intro = head[line_start + 1 :]
    if not intro.strip():  # the call starts a line: the line before introduces it
        intro = head[: max(line_start, 0)].rstrip().rpartition("\n")[2]
    sentence = _SENTENCE_END.split(intro.strip())[-1]
    return bool(_EXAMPLE.search(sentence))


def _whole_reply(text: str, ctx: Context) -> Calls | None:
    """Formats that only count as the entire reply: a pythonic list, Functionary's first call."""
    if text.startswith("[") and text.endswith("]") and _PYTHON_LIST.match(text):
        found = pythonic_calls(text, allow_bare=False)
        calls = [ParsedCall(*call) for call in found] if found else None
        return calls if calls and ctx.offered(calls) else None
    head = _FUNCTIONARY_START.match(text)
    if head and ctx.names is not None and head.group(1) in ctx.names:
        read = ctx.read(text, head.end())
        if read and isinstance(read[0], dict) and only_separators(text, read[1]):
            return [ParsedCall(head.group(1), read[0])]
    return None


def _json_spans(text: str, ctx: Context, fences: list[int]) -> list[Span]:
    """Each strict JSON call (or list of calls) in the text that is not shown as an example."""
    spans: list[Span] = []
    pos = 0
    while not ctx.exhausted and (match := _JSON_CANDIDATE.search(text, pos)) is not None:
        start = match.start()
        pos = start + 1
        if _in_fence(fences, start) or in_inline_code(text, start):
            ctx.charge(_SKIP_COST)
            continue
        for begin in (_list_start(text, start), start):
            if begin is None:
                continue
            read = ctx.read(text, begin)
            if read is None:
                continue
            pos = max(pos, read[1])  # nothing inside a value is a call of its own
            calls = calls_from_json(read[0], strict=True)
            if calls and ctx.offered(calls) and not looks_shown(text, begin):
                spans.append((begin, read[1], calls))
            break
    return spans


def _list_start(text: str, start: int) -> int | None:
    """Where a list opens right before the object at `start` (xLAM writes calls as a list)."""
    window = max(0, start - 64)
    before = text[window:start].rstrip()
    return window + len(before) - 1 if before.endswith("[") else None


def _python_spans(text: str, ctx: Context, fences: list[int]) -> list[Span]:
    """Pythonic lists of offered tools in prose (`Checking: [get_weather(city="Paris")]`)."""
    assert ctx.names is not None
    spans: list[Span] = []
    pos = 0
    while not ctx.exhausted and (match := _PYTHON_LIST.search(text, pos)) is not None:
        start = match.start()
        pos = start + 1
        name = match.group(1).removesuffix(".call")
        if name not in ctx.names or _in_fence(fences, start) or in_inline_code(text, start):
            ctx.charge(_SKIP_COST)
            continue
        end = _closing_bracket(text, start, ctx)
        if end is None:
            continue
        found = pythonic_calls(text[start:end], allow_bare=False)
        calls = [ParsedCall(*call) for call in found] if found else None
        if calls and ctx.offered(calls) and not looks_shown(text, start):
            spans.append((start, end, calls))
            pos = end
        else:
            ctx.miss()
    return spans


def _closing_bracket(text: str, start: int, ctx: Context) -> int | None:
    """Just past the `]` that closes the list opening at `start`, skipping quoted text."""
    limit = min(len(text), start + _MAX_PYTHON_LIST)
    depth = 0
    i = start
    steps = 0
    end: int | None = None
    while (token := _PYTHON_TOKEN.search(text, i, limit)) is not None:
        steps += 1
        char = token.group()
        i = token.end()
        if char in "\"'":
            closing = _PYTHON_STRING_END[char].match(text, i, limit)
            if closing is None:
                break
            i = closing.end()
        elif char in "[({":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                end = i if char == "]" else None
                break
    # A list that closes is paid like any read; a search that ran off is paid per step.
    ctx.charge(i - start if end is not None else (i - start) + steps * _TOKEN_COST)
    return end


def _fence_bounds(text: str) -> list[int]:
    """Positions of the fence markers: a position is inside a fence after an odd number."""
    bounds: list[int] = []
    pos = text.find("```")
    while pos >= 0:
        bounds.append(pos)
        pos = text.find("```", pos + 3)
    return bounds


def _in_fence(bounds: list[int], pos: int) -> bool:
    return bisect_right(bounds, pos) % 2 == 1
