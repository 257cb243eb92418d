"""A forgiving JSON reader for what models write: JSON, JSON5-ish and Python-literal dialects.

Accepts unquoted keys, single quotes, trailing or missing commas, True/False/None, raw
newlines in strings, and Gemma's `<|"|>` / `<escape>` string delimiters. It never evaluates.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn


class LenientJSONError(ValueError):
    """The text is not a value even under the relaxed rules.

    `pos` is how far the reader got, so callers can bound the work that failed reads cost.
    """

    def __init__(self, message: str, pos: int = 0) -> None:
        super().__init__(message)
        self.pos = pos


_MAX_DEPTH = 64
_FIRST_WINDOW = 4096
_WS_RUN = re.compile("[ \t\r\n\f\v\u00a0\ufeff]*")
_RUNS = {'"': re.compile(r'[^"\\]*'), "'": re.compile(r"[^'\\]*")}
_LONE_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON value")


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):  # 1e999: no JSON encoder could send it back
        raise ValueError(f"{token[:20]} is out of range")
    return value


# Most model output is plain JSON: the C decoder reads it far faster than the relaxed reader.
_FAST = json.JSONDecoder(strict=False, parse_constant=_no_constants, parse_float=_finite)
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_BAREWORD = re.compile(r"[A-Za-z_$][\w$.\-]*")
_DIGITS = re.compile(r"\d+")
_KEYWORDS: dict[str, Any] = {
    "true": True,
    "false": False,
    "null": None,
    "True": True,
    "False": False,
    "None": None,
}
# Gemma-family models quote strings with special tokens instead of '"'.
_TOKEN_QUOTES = ('<|"|>', "<escape>")
_ESCAPES = {
    '"': '"',
    "'": "'",
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "0": "\0",
}


def loads(text: str) -> Any:
    """Read exactly one value from `text` (surrounding whitespace allowed)."""
    value, end = scan(text, 0)
    if skip_ws(text, end) != len(text):
        raise LenientJSONError(f"unexpected text after the value at {end}", end)
    return value


def scan(text: str, pos: int) -> tuple[Any, int]:
    """Read one value starting at `pos` (leading whitespace allowed); return it and its end."""
    pos = skip_ws(text, pos)
    reached = pos
    if pos < len(text) and text[pos] in '{["':
        fast = _scan_fast(text, pos)
        if isinstance(fast, tuple):
            return fast
        reached = fast
    try:
        return _value(text, pos, 0)
    except LenientJSONError as exc:
        exc.pos = max(exc.pos, reached)
        raise


def _scan_fast(text: str, pos: int) -> tuple[Any, int] | int:
    """Plain JSON at `pos` read by the C decoder; on failure, how far it got.

    It reads from a window that grows only while the value may continue past it: a decode
    error counts the line breaks before it, so decoding from the whole text each time would
    make every failed read cost the length of everything before it.
    """
    window = _FIRST_WINDOW
    while True:
        stop = min(len(text), pos + window)
        chunk = text[pos:stop]
        try:
            value, end = _FAST.raw_decode(chunk)
        except json.JSONDecodeError as exc:
            cut_short = exc.msg.startswith("Unterminated") or exc.pos >= len(chunk) - 64
            if stop < len(text) and cut_short:
                window *= 16
                continue
            return pos + exc.pos
        except (ValueError, RecursionError):  # NaN, 1e999, or nesting the C decoder refuses
            return pos
        # The C decoder keeps lone surrogates, which could not be sent as UTF-8 later.
        if _LONE_SURROGATE_ESCAPE.search(chunk, 0, end):
            return pos
        return value, pos + end


def skip_ws(text: str, pos: int) -> int:
    match = _WS_RUN.match(text, pos)
    return match.end() if match else pos


def _value(text: str, pos: int, depth: int) -> tuple[Any, int]:
    if depth > _MAX_DEPTH:
        raise LenientJSONError("nested too deeply", pos)
    if pos >= len(text):
        raise LenientJSONError("unexpected end of text", pos)
    ch = text[pos]
    if ch == "{":
        return _object(text, pos + 1, depth)
    if ch == "[":
        return _array(text, pos + 1, depth)
    if ch in "\"'" or text.startswith(_TOKEN_QUOTES, pos):
        return _string(text, pos)
    number = _NUMBER.match(text, pos)
    if number:
        return _number(number.group(), pos), number.end()
    word = _BAREWORD.match(text, pos)
    if word:
        token = word.group()
        # Unknown barewords read as strings: `{city: Paris}` is what a model meant.
        return _KEYWORDS.get(token, token), word.end()
    raise LenientJSONError(f"unexpected {ch!r} at {pos}", pos)


def _object(text: str, pos: int, depth: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}
    n = len(text)
    while True:
        pos = skip_ws(text, pos)
        while pos < n and text[pos] == ",":
            pos = skip_ws(text, pos + 1)
        if pos >= n:
            raise LenientJSONError("unclosed object", n)
        if text[pos] == "}":
            return result, pos + 1
        key, pos = _key(text, pos)
        pos = skip_ws(text, pos)
        if pos >= n or text[pos] not in ":=":
            raise LenientJSONError(f"expected ':' at {pos}", pos)
        value, pos = _value(text, skip_ws(text, pos + 1), depth + 1)
        result[key] = value
        pos = skip_ws(text, pos)
        if pos < n and text[pos] not in ",}" and not _starts_key(text, pos):
            raise LenientJSONError(f"expected ',' or '}}' at {pos}", pos)


def _array(text: str, pos: int, depth: int) -> tuple[list[Any], int]:
    result: list[Any] = []
    n = len(text)
    while True:
        pos = skip_ws(text, pos)
        while pos < n and text[pos] == ",":
            pos = skip_ws(text, pos + 1)
        if pos >= n:
            raise LenientJSONError("unclosed array", n)
        if text[pos] == "]":
            return result, pos + 1
        value, pos = _value(text, pos, depth + 1)
        result.append(value)


def _starts_key(text: str, pos: int) -> bool:
    ch = text[pos]
    return ch in "\"'" or ch.isalpha() or ch == "_" or text.startswith(_TOKEN_QUOTES, pos)


def _key(text: str, pos: int) -> tuple[str, int]:
    if text[pos] in "\"'" or text.startswith(_TOKEN_QUOTES, pos):
        return _string(text, pos)
    word = _BAREWORD.match(text, pos) or _DIGITS.match(text, pos)
    if not word:
        raise LenientJSONError(f"expected a key at {pos}", pos)
    return word.group(), word.end()


def _number(token: str, pos: int) -> int | float:
    try:
        return _finite(token) if any(c in token for c in ".eE") else int(token)
    except ValueError:  # e.g. more digits than int() accepts
        raise LenientJSONError(f"bad number {token[:20]!r}", pos) from None


def _string(text: str, pos: int) -> tuple[str, int]:
    for token in _TOKEN_QUOTES:
        if text.startswith(token, pos):
            end = text.find(token, pos + len(token))
            if end < 0:
                raise LenientJSONError("unterminated string", len(text))
            return text[pos + len(token) : end], end + len(token)
    quote = text[pos]
    run = _RUNS[quote]
    parts: list[str] = []
    i = pos + 1
    n = len(text)
    while True:
        # Copy runs without quotes or backslashes in one slice; strings can be long.
        match = run.match(text, i)
        j = match.end() if match else i
        parts.append(text[i:j])
        if j >= n:
            raise LenientJSONError("unterminated string", n)
        if text[j] == quote:
            return _join_surrogates("".join(parts)), j + 1
        if j + 1 >= n:
            raise LenientJSONError("unterminated string", n)
        esc = text[j + 1]
        if esc == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[j + 2 : j + 6]):
            parts.append(chr(int(text[j + 2 : j + 6], 16)))
            i = j + 6
        elif esc in _ESCAPES:
            parts.append(_ESCAPES[esc])
            i = j + 2
        else:
            # Unknown escapes (Windows paths like C:\Users) keep their backslash.
            parts.append("\\" + esc)
            i = j + 2


_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _join_surrogates(value: str) -> str:
    """Combine \\uD83D\\uDE00 pairs; a lone surrogate could not be sent as UTF-8 later."""
    if not _LONE_SURROGATE.search(value):
        return value
    value = _SURROGATE_PAIR.sub(
        lambda m: chr(0x10000 + ((ord(m.group()[0]) - 0xD800) << 10) + ord(m.group()[1]) - 0xDC00),
        value,
    )
    return _LONE_SURROGATE.sub("\ufffd", value)
