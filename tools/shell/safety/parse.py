"""Parse shell text (tools/shell/safety/syntax.py), and split what cannot be parsed crudely so
that the catastrophic is still recognised in it."""

from __future__ import annotations

import re
import shlex

from tools.shell.safety.model import Command, Redirect, Word
from tools.shell.safety.syntax import MAX_SOURCE_CHARS, Node, ParseFailure, parse

__all__ = [
    "MAX_SOURCE_CHARS",
    "Node",
    "ParseFailure",
    "fallback_commands",
    "is_blank",
    "parse",
    "split_words",
]

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


def is_blank(text: str) -> bool:
    """Only blank lines and comments: nothing would run."""
    return all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines())


def fallback_commands(text: str) -> list[Command]:
    """Crude simple commands of text that could not be parsed (quotes kept, structure
    guessed); only used to recognise what must be blocked, never to allow anything."""
    flat = re.sub(r"\$\{IFS[^}]*\}|\$IFS\b", " ", text)
    flat = re.sub(r"\$\(|[<>]\(|`|\n", " ; ", flat)
    lexer = shlex.shlex(flat, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = flat.replace(";", " ; ").replace("|", " | ").replace("&", " & ").split()
    # {rm,-rf,/} is three words to bash.
    tokens = [part for token in tokens for part in _brace_words(token)]
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


def _brace_words(token: str) -> list[str]:
    whole = re.fullmatch(r"\{([^{}\s]*,[^{}\s]*)\}", token)
    return whole.group(1).split(",") if whole else [token]


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


def split_words(text: str) -> list[str]:
    """Shell-like split of a string (env -S, watch), falling back to whitespace."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()
