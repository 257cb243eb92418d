"""Helpers over bashlex trees: walking every node, literal assignments, fork bombs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tools.shell.safety.model import Word
from tools.shell.safety.words import WordExpander, command_names

_DECLARERS = frozenset({"export", "declare", "local", "readonly", "typeset"})


def descendants(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        for attr in ("parts", "list", "redirects"):
            children = getattr(current, attr, None)
            if isinstance(children, list):
                stack.extend(children)
        for attr in ("command", "output", "heredoc"):
            child = getattr(current, attr, None)
            if hasattr(child, "kind"):
                stack.append(child)


def assignments(node: Any, expander: WordExpander) -> Iterator[tuple[str, str]]:
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
                for word in expander.words(item):
                    if not word.dynamic:
                        yield name, word.text


def _split_assignment(word: Word) -> Iterator[tuple[str, str]]:
    name, eq, value = word.text.partition("=")
    name = name.rstrip("+")
    if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and not word.dynamic:
        yield name, value


def forks_itself(body: Any, name: str) -> bool:
    """A function that runs itself in a pipeline or in the background: a fork bomb."""
    for node in descendants(body):
        if node.kind == "pipeline":
            stages = [p for p in node.parts if p.kind not in ("pipe", "reservedword")]
            if len(stages) > 1 and any(name in command_names(s) for s in stages):
                return True
        if node.kind == "list":
            parts = node.parts
            for i, part in enumerate(parts):
                if (
                    part.kind == "operator"
                    and part.op == "&"
                    and i
                    and (name in command_names(parts[i - 1]))
                ):
                    return True
    return False
