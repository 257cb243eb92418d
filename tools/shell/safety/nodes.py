"""Questions about parsed syntax (tools/shell/safety/syntax.py): literal assignments and
fork bombs."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tools.shell.safety.model import Word
from tools.shell.safety.syntax import Node, descendants
from tools.shell.safety.words import WordExpander, command_names

__all__ = ["assignments", "descendants", "forks_itself"]

_DECLARERS = frozenset({"export", "declare", "local", "readonly", "typeset"})


def assignments(node: Node, expander: WordExpander) -> Iterator[tuple[str, str]]:
    if node.kind == "assignment":
        yield from _split_assignment(expander.single(node))
    elif node.kind == "command":
        words = [p for p in node.parts if p.kind == "word"]
        if words and expander.single(words[0]).text in _DECLARERS:
            for word in words[1:]:
                yield from _split_assignment(expander.single(word))
    elif node.kind == "for":
        words = [p for p in node.parts if p.kind == "word"]
        if words:
            name = expander.single(words[0]).text
            for item in words[1:]:
                for value in expander.words(item):
                    if not value.dynamic:
                        yield name, value.text


def _split_assignment(word: Word) -> Iterator[tuple[str, str]]:
    name, eq, value = word.text.partition("=")
    name = name.rstrip("+")
    if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and not word.dynamic:
        yield name, value


def forks_itself(body: Node, name: str) -> bool:
    """A function that runs itself in a pipeline or in the background: a fork bomb."""
    for node in descendants(body):
        stages = node.parts if node.kind == "pipeline" else ()
        if len(stages) > 1 and any(name in command_names(s) for s in stages):
            return True
        if node.kind == "list":
            parts = node.parts
            for i, part in enumerate(parts):
                if (
                    part.kind == "operator"
                    and part.text == "&"
                    and i
                    and (name in command_names(parts[i - 1]))
                ):
                    return True
    return False
