"""Find tool calls that a model wrote as text, in the dialects open models actually use.

`parse` splits a reply into visible content, tool calls and reasoning (`<think>` blocks).
Text that merely mentions a tag, or shows JSON that is not a call, stays content.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from gateway.llm.lenient_json import LenientJSONError, scan, skip_ws
from gateway.llm.lenient_json import loads as loads_lenient
from gateway.llm.pythonic import pythonic_calls

__all__ = ["ParsedCall", "ParsedReply", "loads_lenient", "parse", "split_reasoning"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParsedReply:
    content: str | None  # the text with call markup and reasoning removed; None if empty
    calls: list[ParsedCall] = field(default_factory=list)
    reasoning: str | None = None


def parse(text: str, *, names: Collection[str] | None = None) -> ParsedReply:
    """Split model output into content, tool calls and reasoning.

    `names`, when given, are the tools that were offered: the ambiguous formats (bare JSON,
    pythonic lists, fenced blocks) only count as calls when they name one of them. Explicit
    markup such as `<tool_call>` always counts, so the caller can tell the model a name is wrong.
    """
    try:
        return _parse(text, names)
    except Exception:  # a parser bug must not fail the user's turn; the text is still shown
        log.warning("textcalls parse failed; keeping the reply as plain text", exc_info=True)
        stripped = text.strip()
        return ParsedReply(content=stripped or None)


# --- reasoning -------------------------------------------------------------------------------

_THINK_OPEN = re.compile(r"<(think|thinking)>")
_THINK_CLOSE = re.compile(r"</(think|thinking)>")


def split_reasoning(text: str) -> tuple[str, str | None]:
    """Remove `<think>` blocks; return the rest and the reasoning (None if there was none).

    A closing tag with no opening one means the output began mid-thought (the chat template
    opened the block), so everything before it is reasoning. An unclosed block runs to the end.
    """
    reasoning: list[str] = []
    first_close = _THINK_CLOSE.search(text)
    first_open = _THINK_OPEN.search(text)
    if first_close and (first_open is None or first_close.start() < first_open.start()):
        reasoning.append(text[: first_close.start()])
        text = text[first_close.end() :]
    if "<think" not in text:
        return text, _join_reasoning(reasoning)
    kept: list[str] = []
    pos = 0
    while True:
        opening = _THINK_OPEN.search(text, pos)
        if opening is None:
            kept.append(text[pos:])
            break
        if _quoted(text, opening.start()):
            kept.append(text[pos : opening.end()])
            pos = opening.end()
            continue
        kept.append(text[pos : opening.start()])
        closing = text.find(f"</{opening.group(1)}>", opening.end())
        if closing < 0:
            reasoning.append(text[opening.end() :])
            break
        reasoning.append(text[opening.end() : closing])
        pos = closing + len(opening.group(1)) + 3
    return "".join(kept), _join_reasoning(reasoning)


def _join_reasoning(parts: list[str]) -> str | None:
    joined = "\n\n".join(p.strip() for p in parts if p.strip())
    return joined or None


def _quoted(text: str, pos: int) -> bool:
    """A tag written in inline code (`<tool_call>`) is being talked about, not used."""
    return pos > 0 and text[pos - 1] == "`"


# --- the scan ---------------------------------------------------------------------------------

_MARKER = re.compile(
    r"<tool_call>|<\|tool_call\|?>|<start_function_call>|<function=|\[TOOL_CALLS\]"
    r"|<\|python_tag\|>|```"
)
_CLOSERS = (
    "</tool_call>",
    "<tool_call|>",
    "<|/tool_call|>",
    "<end_function_call>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_end|>",
)
_NAME = re.compile(r"[A-Za-z_][\w.\-:/]{0,127}")
_NAME_THEN_ARGS = re.compile(
    r"([A-Za-z_][\w.\-]{0,127})\s*(?:\[CALL_ID\]\s*[\w\-]*\s*)?(?:\[ARGS\])?\s*(?=\{)"
)
_CALL_PREFIX = re.compile(r"call:\s*([A-Za-z_][\w.\-]{0,127})\s*(?=\{)")
_FUNCTION_TAG = re.compile(r"<function=([^>\s]{1,128})>")
_PARAMETER_TAG = re.compile(r"<parameter=([^>\s]{1,128})>")
_PYTHONIC_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")

_Calls = list[ParsedCall]
# A handler gets the text and the marker match; it returns the calls found (possibly none)
# and where scanning resumes. With no calls, text up to that point stays content.
_Handler = Callable[[str, re.Match[str], Collection[str] | None], tuple[_Calls, int]]


def _parse(text: str, names: Collection[str] | None) -> ParsedReply:
    body, reasoning = split_reasoning(text)
    content, calls = _extract_marked(body, names)
    if not calls:
        whole = _whole_text_calls(content.strip(), names)
        if whole:
            calls, content = whole, ""
    elif "\n\n\n" in content:
        content = re.sub(r"\n{3,}", "\n\n", content)
    return ParsedReply(content=content.strip() or None, calls=calls, reasoning=reasoning)


def _extract_marked(body: str, names: Collection[str] | None) -> tuple[str, _Calls]:
    kept: list[str] = []
    calls: _Calls = []
    pos = 0
    while True:
        match = _MARKER.search(body, pos)
        if match is None:
            break
        marker = match.group()
        if marker != "```" and _quoted(body, match.start()):
            kept.append(body[pos : match.end()])
            pos = match.end()
            continue
        found, end = _HANDLERS[marker[:6]](body, match, names)
        if found:
            kept.append(body[pos : match.start()])
            calls.extend(found)
        else:
            end = max(end, match.end())
            kept.append(body[pos:end])
        pos = end
    kept.append(body[pos:])
    return "".join(kept), calls


def _skip_closer(text: str, pos: int) -> int:
    i = skip_ws(text, pos)
    for closer in _CLOSERS:
        if text.startswith(closer, i):
            return i + len(closer)
    return pos


def _tagged(text: str, match: re.Match[str], names: Collection[str] | None) -> tuple[_Calls, int]:
    """`<tool_call>`, `<|tool_call>`, `<|tool_call|>`, `<start_function_call>` blocks."""
    i = skip_ws(text, match.end())
    if text.startswith("<function=", i):
        function = _FUNCTION_TAG.match(text, i)
        if function is None:
            return [], match.end()
        found, end = _function_tag(text, function, names)
        return (found, _skip_closer(text, end)) if found else ([], match.end())
    prefixed = _CALL_PREFIX.match(text, i)
    if prefixed:
        call = _named_object(prefixed.group(1), text, prefixed.end())
        if call is None:
            return [], match.end()
        return [call[0]], _skip_closer(text, call[1])
    sequence = _json_sequence(text, i, strict=False)
    if sequence is None:
        return [], match.end()
    return sequence[0], _skip_closer(text, sequence[1])


def _function_tag(
    text: str, match: re.Match[str], names: Collection[str] | None
) -> tuple[_Calls, int]:
    """`<function=name>{json}</function>` or Qwen3-Coder's `<parameter=k>v</parameter>` body."""
    name = match.group(1)
    if not _NAME.fullmatch(name):
        return [], match.end()
    i = skip_ws(text, match.end())
    arguments: dict[str, Any] = {}
    end = match.end()
    if i < len(text) and text[i] == "{":
        try:
            value, end = scan(text, i)
        except LenientJSONError:
            return [], match.end()
        if not isinstance(value, dict):
            return [], match.end()
        arguments = value
    else:
        while (param := _PARAMETER_TAG.match(text, skip_ws(text, end))) is not None:
            close = text.find("</parameter>", param.end())
            stop = close if close >= 0 else len(text)
            arguments[param.group(1)] = _parameter_value(text[param.end() : stop])
            end = stop + len("</parameter>") if close >= 0 else stop
    after = skip_ws(text, end)
    if text.startswith("</function>", after):
        end = after + len("</function>")
    elif not arguments and not text.startswith(("<", "{"), after) and after < len(text):
        # `<function=x>` followed by prose: a mention, not a call.
        return [], match.end()
    return [ParsedCall(name, arguments)], end


def _function_marker(
    text: str, match: re.Match[str], names: Collection[str] | None
) -> tuple[_Calls, int]:
    function = _FUNCTION_TAG.match(text, match.start())
    return _function_tag(text, function, names) if function else ([], match.end())


def _parameter_value(raw: str) -> Any:
    value = raw.strip("\n")
    try:
        parsed = loads_lenient(value)
    except LenientJSONError:
        return value
    # A bareword read back as itself is plain text; keep the original spacing.
    return value if isinstance(parsed, str) else parsed


def _mistral(text: str, match: re.Match[str], names: Collection[str] | None) -> tuple[_Calls, int]:
    """`[TOOL_CALLS][{...}]` (v3) and `[TOOL_CALLS]name[ARGS]{...}` / `name{...}` (v11+)."""
    i = skip_ws(text, match.end())
    sequence = _json_sequence(text, i, strict=False)
    if sequence is not None:
        return sequence
    calls: _Calls = []
    end = match.end()
    while (named := _NAME_THEN_ARGS.match(text, skip_ws(text, end))) is not None:
        call = _named_object(named.group(1), text, named.end())
        if call is None:
            break
        calls.append(call[0])
        end = call[1]
    return calls, end


def _python_tag(
    text: str, match: re.Match[str], names: Collection[str] | None
) -> tuple[_Calls, int]:
    """Llama 3.x `<|python_tag|>` followed by JSON calls (`;`-separated) or a pythonic call."""
    start = skip_ws(text, match.end())
    stop, resume = len(text), len(text)
    for closer in _CLOSERS:
        found = text.find(closer, start)
        if 0 <= found < stop:
            stop, resume = found, found + len(closer)
    segment = text[start:stop].strip()
    sequence = _json_sequence(segment, 0, strict=False)
    if sequence is not None and _only_separators(segment, sequence[1]):
        return sequence[0], resume
    pythonic = _pythonic_calls(segment, allow_bare=True)
    return (pythonic, resume) if pythonic else ([], match.end())


_JSON_FENCES = frozenset({"", "json", "json5", "jsonc"})
_CALL_FENCES = frozenset({"tool_call", "tool_calls", "function_call"})
_CODE_FENCES = frozenset({"tool_code", "python", "py"})


def _fence(text: str, match: re.Match[str], names: Collection[str] | None) -> tuple[_Calls, int]:
    """A fenced block holding only a call (or a list of calls); any other fence stays text."""
    newline = text.find("\n", match.end())
    if newline < 0:
        return [], match.end()
    lang = text[match.end() : newline].strip().lower()
    close = text.find("```", newline)
    inner_end, end = (close, close + 3) if close >= 0 else (len(text), len(text))
    inner = text[newline + 1 : inner_end].strip()
    calls: _Calls | None = None
    if _MARKER.match(inner) and not inner.startswith("```"):
        rest, found = _extract_marked(inner, names)
        calls = found if found and not rest.strip() else None
    elif lang in _JSON_FENCES or lang in _CALL_FENCES:
        strict = lang not in _CALL_FENCES
        sequence = _json_sequence(inner, 0, strict=strict)
        if sequence is not None and _only_separators(inner, sequence[1]):
            calls = _known(sequence[0], names) if strict else sequence[0]
    elif lang in _CODE_FENCES:
        pythonic = _pythonic_calls(inner, allow_bare=True)
        if lang == "tool_code":
            calls = pythonic
        elif names is not None:
            # Plain Python fences are usually code to show; they count only for offered tools.
            calls = _known(pythonic, names)
    # Whatever is not a call is shown as written, including markup inside the fence.
    return calls or [], end


_HANDLERS: dict[str, _Handler] = {
    "<tool_": _tagged,
    "<|tool": _tagged,
    "<start": _tagged,
    "<funct": _function_marker,
    "[TOOL_": _mistral,
    "<|pyth": _python_tag,
    "```": _fence,
}


def _whole_text_calls(text: str, names: Collection[str] | None) -> _Calls | None:
    """Formats with no markup at all: the whole reply is the call (Llama 3 JSON, pythonic)."""
    if text.startswith("<|python_start|>"):
        text = text.removeprefix("<|python_start|>").removesuffix("<|python_end|>").strip()
    if not text or text[0] not in "{[":
        return None
    sequence = _json_sequence(text, 0, strict=True)
    if sequence is not None and _only_separators(text, sequence[1]):
        return _known(sequence[0], names)
    if _PYTHONIC_START.match(text) and text.endswith("]"):
        return _known(_pythonic_calls(text, allow_bare=False), names)
    return None


def _known(calls: _Calls | None, names: Collection[str] | None) -> _Calls | None:
    if not calls:
        return None
    if names is not None and any(call.name not in names for call in calls):
        return None
    return calls


def _only_separators(text: str, pos: int) -> bool:
    return not text[pos:].strip(" \t\r\n;,")


# --- JSON calls -------------------------------------------------------------------------------

_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "parameters", "args", "input", "tool_input", "params")
_META_KEYS = frozenset({"id", "type", "index", "call_id"})
_STRICT_KEYS = frozenset(_NAME_KEYS) | frozenset(_ARG_KEYS) | _META_KEYS


def _json_sequence(text: str, pos: int, *, strict: bool) -> tuple[_Calls, int] | None:
    """Calls written as JSON values one after another (`;`, `,` or newlines between them)."""
    calls: _Calls = []
    end = pos
    i = pos
    while True:
        i = skip_ws(text, i)
        if i >= len(text) or text[i] not in "{[":
            break
        try:
            value, after = scan(text, i)
        except LenientJSONError:
            break
        found = _calls_from_json(value, strict=strict)
        if not found:
            break
        calls.extend(found)
        end = after
        i = skip_ws(text, after)
        if i < len(text) and text[i] in ";,":
            i += 1
    return (calls, end) if calls else None


def _calls_from_json(value: Any, *, strict: bool) -> _Calls | None:
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls: _Calls = []
    for item in items:
        call = _call_from_object(item, strict=strict)
        if call is None:
            return None
        calls.append(call)
    return calls


def _call_from_object(obj: Any, *, strict: bool) -> ParsedCall | None:
    """One call object in any of the usual spellings; None if it is not one.

    Strict (no surrounding markup): the object must have a name and an arguments key and
    nothing else, so that `{"name": "Ana", "age": 3}` in an answer is never a call.
    """
    if not isinstance(obj, dict):
        return None
    function = obj.get("function")
    if isinstance(function, dict):  # OpenAI's own shape, pasted as text
        if strict and not set(obj) <= _META_KEYS | {"function"}:
            return None
        return _call_from_object(function, strict=strict)
    name_key = next((k for k in _NAME_KEYS if isinstance(obj.get(k), str)), None)
    args_key = next((k for k in _ARG_KEYS if k in obj), None)
    if name_key is None:
        return None
    name = obj[name_key].strip()
    if not _NAME.fullmatch(name):
        return None
    if strict and (args_key is None or not set(obj) <= _STRICT_KEYS):
        return None
    if args_key is None:
        # Small models sometimes inline the arguments next to the name.
        arguments: Any = {k: v for k, v in obj.items() if k != name_key and k not in _META_KEYS}
    else:
        arguments = _arguments(obj[args_key])
    if not isinstance(arguments, dict):
        return None
    return ParsedCall(name, arguments)


def _arguments(raw: Any) -> Any:
    if raw is None:
        return {}
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            return loads_lenient(raw)
        except LenientJSONError:
            return None
    return raw


def _named_object(name: str, text: str, pos: int) -> tuple[ParsedCall, int] | None:
    try:
        value, end = scan(text, pos)
    except LenientJSONError:
        return None
    if not isinstance(value, dict) or not _NAME.fullmatch(name):
        return None
    return ParsedCall(name, value), end


def _pythonic_calls(source: str, *, allow_bare: bool) -> _Calls | None:
    found = pythonic_calls(source, allow_bare=allow_bare)
    return [ParsedCall(name, arguments) for name, arguments in found] if found else None
