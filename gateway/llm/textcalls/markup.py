"""Calls announced by markup: wrapper tags (`<tool_call>` and its lenient kin), special tokens
(Mistral, Llama, DeepSeek, Kimi, Command R, InternLM, Functionary, Gemma) and fenced blocks.

One regex finds the next marker; its handler reads the calls after it and says where scanning
resumes. Markers inside text a handler consumed are never visited again, so a scan is linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gateway.llm.lenient_json import skip_ws
from gateway.llm.pythonic import pythonic_calls
from gateway.llm.textcalls.jsoncalls import json_calls, named_object, only_separators
from gateway.llm.textcalls.model import CUT, Calls, Context, ParsedCall, Pieces, join_pieces
from gateway.llm.textcalls.prose import in_inline_code, looks_shown
from gateway.llm.textcalls.tokens import (
    WRAPPER_NAMES,
    action,
    functionary,
    section,
    skip_closers,
)
from gateway.llm.textcalls.xmlcalls import INVOKE_TAG, function_tag, glm_call, invoke_tag

_GENERIC_WRAPPERS = frozenset({"<response>", "<json>", "<xml>"})
# The markers that open with `<`, without it: (handler name, pattern after the `<`).
_TAGS = (
    ("wrapper", rf"(?i:(?:{WRAPPER_NAMES})>)|\|tool_call\|?>|start_function_call>"),
    ("wrapper", r"｜+DSML｜+(?:function|tool)_calls>"),
    ("function", r"function(?:=|\s+name\s*=)"),
    ("invoke", r"(?:｜+DSML｜+)?invoke\s+name\s*="),
    ("python", r"\|python_tag\|>|\|python_start\|>"),
    ("section", r"[|｜]tool[_▁]calls(?:[_▁]section)?[_▁]begin[|｜]>|｜tool▁calls｜>"),
    ("section", r"[|｜]tool[_▁]call[_▁]begin[|｜]>"),
    ("action", r"\|START_ACTION\|>|\|action_start\|>(?:<\|plugin\|>)?"),
)
# One scan per marker family, each opening with a fixed character or word so the regex
# engine skips ahead to it in C; trying every alternative at every position is ~30x slower.
_SCANS: tuple[tuple[str | None, re.Pattern[str]], ...] = (
    (
        None,
        re.compile("<(?:" + "|".join(f"(?P<{n}{i}>{p})" for i, (n, p) in enumerate(_TAGS)) + ")"),
    ),
    ("mistral", re.compile(r"\[TOOL_CALLS\]")),
    ("fence", re.compile("```")),
    ("functionary", re.compile(r">>>(?=[A-Za-z_][\w.\-]{0,127}\n)")),
    ("action", re.compile(r"functools(?=\[)")),
    ("bare", re.compile(r"^[ \t]*call:(?=[A-Za-z_])", re.MULTILINE)),
)
CALL_MARKERS = (
    "<tool_call>",
    "<tool_calls>",
    "<tools>",
    "<tool>",
    "<function_call>",
    "<function_calls>",
    "<functioncall>",
    "<minimax:tool_call>",
    "<seed:tool_call>",
    "<|tool_call>",
    "<|tool_call|>",
    "<start_function_call>",
    "<function=",
    "<function name=",
    "<invoke name=",
    "<｜DSML｜",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<|python_start|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁calls｜>",
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|START_ACTION|>",
    "<|action_start|>",
    "functools[",
)
"""Exact markers that open a call in the usual spelling: a streaming filter holds text back
from the first of them (the ambiguous formats can only be judged once the reply is done)."""
_CALL_PREFIX = re.compile(r":?\s*call:\s*([A-Za-z_][\w.\-]{0,127})\s*(?=\{)")
_NAME_THEN_OBJECT = re.compile(
    r"([A-Za-z_][\w.\-]{0,127})\s*(?:\[CALL_ID\]\s*[\w\-]*\s*)?(?:\[ARGS\])?\s*(?=\{)"
)
_PYTHON_CALL = re.compile(r"[A-Za-z_][\w.]*\s*\(")

_JSON_FENCES = frozenset({"", "json", "json5", "jsonc", "xml"})
_CALL_FENCES = frozenset({"tool_call", "tool_calls", "function_call", "function_calls"})

Handler = Callable[[str, re.Match[str], Context], tuple[Calls, int]]


def extract_marked(body: str, ctx: Context) -> tuple[Pieces, Calls]:
    """The text with every marked call cut out (see `join_pieces`), and the calls in order."""
    kept: Pieces = []
    calls: Calls = []
    pos = 0
    markers = _MarkerScan(body)
    while not ctx.exhausted:
        found_marker = markers.next(pos)
        if found_marker is None:
            break
        kind, match = found_marker
        if kind != "fence" and in_inline_code(body, match.start()):
            ctx.miss()
            kept.append(body[pos : match.end()])
            pos = match.end()
            continue
        found, end = _HANDLERS[kind](body, match, ctx)
        if found:
            kept.extend((body[pos : match.start()], CUT))
            calls.extend(found)
        else:
            ctx.miss()
            end = max(end, match.end())
            kept.append(body[pos:end])
        pos = end
    kept.append(body[pos:])
    return kept, calls


def starts_with_marker(text: str) -> bool:
    return any(pattern.match(text) for _, pattern in _SCANS)


class _MarkerScan:
    """The next marker at or after a position, from one scan per family whose results are
    reused until the position passes them, so each scan moves through the text once."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._found: list[re.Match[str] | None] = [None] * len(_SCANS)
        self._searched_from = [-1] * len(_SCANS)

    def next(self, pos: int) -> tuple[str, re.Match[str]] | None:
        best: tuple[str, re.Match[str]] | None = None
        for i, (kind, pattern) in enumerate(_SCANS):
            match = self._found[i]
            stale = match.start() < pos if match else self._searched_from[i] < 0
            if stale:
                match = pattern.search(self._text, pos)
                self._found[i], self._searched_from[i] = match, pos
            if match and (best is None or match.start() < best[1].start()):
                best = (kind or (match.lastgroup or "").rstrip("0123456789"), match)
        return best


def _wrapper(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """A wrapper tag around a call: JSON, `call:name{...}`, `<function=...>`, `<invoke>`,
    GLM's `name<arg_key>...`, or pythonic lines (OLMo 3)."""
    generic = match.group().lower() in _GENERIC_WRAPPERS
    i = skip_ws(text, match.end())
    found = _wrapped_body(text, i, ctx, generic=generic)
    if found is None or (generic and not ctx.offered(found[0])):
        return [], match.end()
    return found[0], skip_closers(text, found[1])


def _wrapped_body(text: str, i: int, ctx: Context, *, generic: bool) -> tuple[Calls, int] | None:
    if generic:  # `<response>`, `<json>`, `<xml>` are ordinary words: only strict JSON counts
        return json_calls(text, i, ctx, strict=True)
    if text.startswith("<function", i):
        return _repeated(text, i, ctx, function_tag)
    if INVOKE_TAG.match(text, i):
        return _repeated(text, i, ctx, invoke_tag)
    prefixed = _CALL_PREFIX.match(text, i) or _NAME_THEN_OBJECT.match(text, i)
    if prefixed:
        call = named_object(prefixed.group(1), text, prefixed.end(), ctx)
        return ([call[0]], call[1]) if call else None
    glm = glm_call(text, i)
    if glm:
        return [glm[0]], glm[1]
    if _PYTHON_CALL.match(text, i):
        return _pythonic_lines(text, i, ctx)
    return json_calls(text, i, ctx, strict=False)


def _repeated(
    text: str,
    pos: int,
    ctx: Context,
    read: Callable[[str, int, Context], tuple[ParsedCall, int] | None],
) -> tuple[Calls, int] | None:
    calls: Calls = []
    end = pos
    while (found := read(text, skip_ws(text, end), ctx)) is not None:
        calls.append(found[0])
        end = found[1]
    return (calls, end) if calls else None


def _pythonic_lines(text: str, pos: int, ctx: Context) -> tuple[Calls, int] | None:
    """One pythonic call per line up to the next tag (OLMo 3's `<function_calls>` body)."""
    stop = text.find("<", pos)
    stop = len(text) if stop < 0 else stop
    ctx.charge(stop - pos)
    calls: Calls = []
    for line in text[pos:stop].splitlines():
        if not line.strip():
            continue
        found = pythonic_calls(line, allow_bare=True)
        if not found or len(found) != 1:
            return None
        calls.append(ParsedCall(*found[0]))
    return (calls, stop) if calls else None


def _function(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """`<function=name>...</function>` or `<function name="name">...</function>`, unwrapped."""
    found = function_tag(text, match.start(), ctx)
    return ([found[0]], skip_closers(text, found[1])) if found else ([], match.end())


def _invoke(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    found = invoke_tag(text, match.start(), ctx)
    return ([found[0]], skip_closers(text, found[1])) if found else ([], match.end())


def _mistral(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """`[TOOL_CALLS][{...}]` (v3) and `[TOOL_CALLS]name[ARGS]{...}` / `name{...}` (v11+)."""
    i = skip_ws(text, match.end())
    sequence = json_calls(text, i, ctx, strict=False)
    if sequence is not None:
        return sequence
    calls: Calls = []
    end = match.end()
    while (named := _NAME_THEN_OBJECT.match(text, skip_ws(text, end))) is not None:
        call = named_object(named.group(1), text, named.end(), ctx)
        if call is None:
            break
        calls.append(call[0])
        end = call[1]
    return calls, end


def _python(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """Llama `<|python_tag|>` / `<|python_start|>`: JSON calls (`;`-separated) or pythonic."""
    start = skip_ws(text, match.end())
    sequence = json_calls(text, start, ctx, strict=False)
    if sequence is not None:
        return sequence[0], skip_closers(text, sequence[1])
    stop = text.find("<|", start)
    stop = len(text) if stop < 0 else stop
    ctx.charge(stop - start)
    found = pythonic_calls(text[start:stop], allow_bare=True)
    if not found:
        return [], match.end()
    return [ParsedCall(*call) for call in found], skip_closers(text, stop)


def _fence(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """A fenced block holding only calls; any other fence is shown as written, markup and all."""
    newline = text.find("\n", match.end())
    if newline < 0:
        return [], match.end()
    lang = text[match.end() : newline].strip().lower()
    close = text.find("```", newline)
    inner_end, end = (close, close + 3) if close >= 0 else (len(text), len(text))
    inner = text[newline + 1 : inner_end].strip()
    calls: Calls | None = None
    if lang in _JSON_FENCES or lang in _CALL_FENCES:
        if starts_with_marker(inner):
            pieces, found = extract_marked(inner, ctx)
            calls = found if found and not join_pieces(pieces).strip() else None
        else:
            sequence = json_calls(inner, 0, ctx, strict=lang not in _CALL_FENCES)
            if sequence is not None and only_separators(inner, sequence[1]):
                calls = sequence[0]
    elif lang == "tool_code" or (lang in ("python", "py") and ctx.names is not None):
        # Plain Python fences are usually code to show: they count only for offered tools.
        found_py = pythonic_calls(inner, allow_bare=True)
        calls = [ParsedCall(*call) for call in found_py] if found_py else None
    if not calls or not ctx.offered(calls) or looks_shown(text, match.start()):
        return [], end
    return calls, end


def _bare(text: str, match: re.Match[str], ctx: Context) -> tuple[Calls, int]:
    """Gemma 4's `call:name{...}` written at the start of a line without its tokens."""
    prefixed = _CALL_PREFIX.match(text, match.start() + match.group().index("call:"))
    call = named_object(prefixed.group(1), text, prefixed.end(), ctx) if prefixed else None
    if call is None or not ctx.offered([call[0]]):
        return [], match.end()
    return [call[0]], skip_closers(text, call[1])


_HANDLERS: dict[str, Handler] = {
    "wrapper": _wrapper,
    "function": _function,
    "invoke": _invoke,
    "mistral": _mistral,
    "python": _python,
    "fence": _fence,
    "section": section,
    "action": action,
    "functionary": functionary,
    "bare": _bare,
}
