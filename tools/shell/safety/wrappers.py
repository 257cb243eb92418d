"""What a command runs in turn, and the shared helpers for finding it (option skipping)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tools.shell.safety.model import Word

_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
# Stands for the items xargs or parallel read from their input and append.
INPUT_ITEMS = Word(text="<input items>", pattern="*", dynamic=True, computed=True)
MAX_ITEMS = 8


@dataclass(frozen=True)
class Unwrapped:
    inner: list[tuple[Word, ...]] = field(default_factory=list)  # argvs run by the command
    scripts: list[Word] = field(default_factory=list)  # shell code run by the command
    # $0, $1 ... of the scripts (sh -c 'script' arg0 arg1)
    positional: tuple[Word, ...] = ()


@dataclass(frozen=True)
class Spec:
    short_args: str = ""  # short options taking a value
    long_args: frozenset[str] = frozenset()
    assignments: bool = False  # NAME=value words may precede the command
    positionals: int = 0  # operands before the command (timeout's duration, chroot's root)


def skip(args: Sequence[Word], spec: Spec) -> int:
    """Index of the wrapped command's name."""
    i = 0
    while i < len(args):
        text = args[i].text
        if text == "--":
            i += 1
            break
        if spec.assignments and _ASSIGNMENT.match(text):
            i += 1
        elif text.startswith("--"):
            i += 1 + (text in spec.long_args)
        elif text.startswith("-") and len(text) > 1:
            i += 1
            for k, ch in enumerate(text[1:]):
                if ch in spec.short_args:
                    i += k == len(text) - 2
                    break
        else:
            break
    return i + spec.positionals


def joined(words: Sequence[Word]) -> Word:
    """Arguments a command joins with spaces and hands to a shell (eval, ssh, watch)."""
    return Word(
        text=" ".join(w.text for w in words),
        pattern=" ".join(w.pattern for w in words),
        dynamic=any(w.dynamic for w in words),
        computed=any(w.computed for w in words),
        subcommands=frozenset().union(*(w.subcommands for w in words)),
    )


def fill(word: Word, marker: str, item: Word) -> Word:
    if marker not in word.text:
        return word
    return Word(
        text=word.text.replace(marker, item.text),
        pattern=word.pattern.replace(marker, item.pattern),
        dynamic=word.dynamic or item.dynamic,
        computed=word.computed or item.computed,
    )
