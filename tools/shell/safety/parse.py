"""Parse shell text with bashlex, papering over its gaps without moving any character,
and split what it still cannot parse crudely so the catastrophic is still recognised."""

from __future__ import annotations

import re
import shlex
from typing import Any

from tools.shell.safety.model import Command, Redirect, Word

MAX_SOURCE_CHARS = 40_000  # bashlex is pure Python (~1 s here); longer text is not parsed

_QUOTED_HEREDOC = re.compile(r"<<(-?)([ \t]*)(['\"])([A-Za-z0-9_.-]+)\3")
_ESCAPED_HEREDOC = re.compile(r"<<(-?)([ \t]*)\\(?=[A-Za-z0-9_])")
_ARITH_SAFE = re.compile(r"[\w\s+\-*/%<>=!&|^~?:,.()\[\]{}$#;]*")
_TIME_WORD = re.compile(r"(?<![^\s;&|(){}!])time(?=\s)")
_OPEN_TEST = re.compile(r"(?<![^\s;&|(!])\[\[(?=\s)")
_CLOSE_TEST = re.compile(r"(?<=\s)\]\](?=[\s;&|)]|$)")
_RESERVED = frozenset(
    {
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "do",
        "done",
        "while",
        "until",
        "for",
        "in",
        "case",
        "esac",
        "select",
        "function",
        "time",
        "coproc",
        "{",
        "}",
        "!",
        "[[",
        "]]",
    }
)


class ParseFailure(Exception):
    """bashlex could not parse the text; the message says where."""


def parse(text: str) -> list[Any]:
    if len(text) > MAX_SOURCE_CHARS:
        raise ParseFailure(f"longer than {MAX_SOURCE_CHARS:,} characters")
    # Imported at the first command, not with the gateway: bashlex builds its parser tables
    # on import (~0.2 s), which every CLI call and process start would otherwise pay.
    import bashlex

    try:
        return list(bashlex.parse(prepare(text)))
    except Exception as exc:  # bashlex raises many types, including RecursionError
        raise ParseFailure(_describe(exc)) from None


def _describe(exc: Exception) -> str:
    import bashlex

    if isinstance(exc, bashlex.errors.ParsingError):
        return exc.message if hasattr(exc, "message") else str(exc)
    if isinstance(exc, NotImplementedError):
        return f"unsupported shell syntax: {str(exc).split(',')[0]}"
    return type(exc).__name__


def is_blank(text: str) -> bool:
    """Only blank lines and comments: nothing would run."""
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def prepare(text: str) -> str:
    """Same-length rewrites of syntax bashlex rejects but whose meaning does not matter here.

    Offsets are kept, so words are still read from the original text, and no rewrite adds
    or removes a quote character, so no command can end up hidden inside a string.
    """
    text = _QUOTED_HEREDOC.sub(lambda m: f"<<{m[1]}{m[2]} {m[4]} ", text)
    text = _ESCAPED_HEREDOC.sub(lambda m: f"<<{m[1]}{m[2]} ", text)
    text = _replace_arithmetic(text)
    text = _TIME_WORD.sub("_ime", text)
    text = _OPEN_TEST.sub("_[", text)
    return _CLOSE_TEST.sub("]_", text)


def _replace_arithmetic(text: str) -> str:
    """$((expr)) becomes ${___} and for ((a;b;c)) becomes for _ in _ when expr runs nothing."""
    out = list(text)
    for m in re.finditer(r"\$\(\(|\bfor\s*\(\(", text):
        start = m.end()
        end = _arith_end(text, start)
        if end < 0:
            continue
        body = text[start : end - 2]
        if not _ARITH_SAFE.fullmatch(body) or "$(" in body:
            continue
        is_for = not m.group().startswith("$")
        if is_for:
            first = text.index("((", m.start())
            filler = "_ in _".ljust(end - first)
            out[first:end] = filler
        elif ";" not in body:
            out[m.start() : end] = "${" + "_" * (end - m.start() - 3) + "}"
    return "".join(out)


def _arith_end(text: str, start: int) -> int:
    """Offset just past the `))` closing an arithmetic opened before `start`, or -1."""
    depth = 2
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 1 and text.startswith("))", i) and i + 2 <= len(text):
                return i + 2 if _balanced(text[start:i]) else -1
            if depth <= 1:
                return -1
    return -1


def _balanced(body: str) -> bool:
    depth = 0
    for ch in body:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0


def fallback_commands(text: str) -> list[Command]:
    """Crude simple commands of text bashlex could not parse (quotes kept, structure guessed)."""
    flat = re.sub(r"\$\{IFS[^}]*\}|\$IFS\b", " ", text)
    flat = re.sub(r"\$\(|[<>]\(|`|\n", " ; ", flat)
    lexer = shlex.shlex(flat, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = flat.replace(";", " ; ").replace("|", " | ").replace("&", " & ").split()
    commands: list[Command] = []
    current: list[str] = []
    for token in [*tokens, ";"]:
        if token and set(token) <= set(";&|()"):
            if current:
                commands.append(_fallback_command(current))
            current = []
        else:
            current.append(token)
    return commands


def _fallback_command(tokens: list[str]) -> Command:
    while tokens and (tokens[0] in _RESERVED or re.match(r"[A-Za-z_]\w*=", tokens[0])):
        tokens = tokens[1:]
    words: list[Word] = []
    redirects: list[Redirect] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if set(token) <= set("<>&") and i + 1 < len(tokens):
            redirects.append(Redirect(token, _loose_word(tokens[i + 1])))
            i += 2
            continue
        words.append(_loose_word(token))
        i += 1
    return Command(words=tuple(words), redirects=tuple(redirects))


def _loose_word(token: str) -> Word:
    if "$" not in token:
        return Word.literal(token)
    pattern = re.sub(r"\$\{[^}]*\}|\$\w+|\$.", "*", token)
    return Word(text=token, pattern=pattern, dynamic=True, computed=True)


def heredoc_substitutions(body: str) -> list[str]:
    """The code inside $(...) and `...` of an unquoted here-document, which bash runs."""
    found: list[str] = []
    i = 0
    while i < len(body):
        if body[i] == "\\":
            i += 2
        elif body.startswith("$(", i) and not body.startswith("$((", i):
            end = _closing_paren(body, i + 2)
            found.append(body[i + 2 : end])
            i = end + 1
        elif body[i] == "`":
            end = body.find("`", i + 1)
            end = len(body) if end < 0 else end
            found.append(body[i + 1 : end])
            i = end + 1
        else:
            i += 1
    return found


def _closing_paren(text: str, i: int) -> int:
    depth, quote = 1, ""
    while i < len(text):
        ch = text[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text)


def split_words(text: str) -> list[str]:
    """Shell-like split of a string (env -S, watch), falling back to whitespace."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()
