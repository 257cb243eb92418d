"""Option parsing for checks: which flags a command got and which words are operands."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tools.shell.safety.model import Word


@dataclass
class Flags:
    short: set[str] = field(default_factory=set)  # single letters, clusters split (-rf: r, f)
    long: set[str] = field(default_factory=set)  # --names, without any =value
    values: dict[str, list[str]] = field(default_factory=dict)  # "-o"/"--output" -> values
    operands: list[Word] = field(default_factory=list)

    def has(self, *names: str) -> bool:
        """Any of "-r", "--recursive" ... given (short names with one dash)."""
        for name in names:
            # GNU tools accept unambiguous prefixes: --rec means --recursive.
            if name.startswith("--") and any(
                name.startswith(given) and len(given) > 3 for given in self.long
            ):
                return True
            if not name.startswith("--") and name[1:] in self.short:
                return True
        return False

    def value(self, *names: str) -> list[str]:
        out: list[str] = []
        for name in names:
            out += self.values.get(name, [])
        return out


def parse_flags(
    words: Sequence[Word], short_args: str = "", long_args: Iterable[str] = ()
) -> Flags:
    """GNU-style: options may follow operands; `--` ends options; `-` is an operand.

    `short_args` are letters whose option takes a value (attached or the next word);
    `long_args` likewise for --long options (`--out=x` or `--out x`).
    """
    takes = set(long_args)
    flags = Flags()
    i = 0
    while i < len(words):
        text = words[i].text
        i += 1
        if text == "--":
            flags.operands += words[i:]
            break
        if text.startswith("--"):
            name, eq, val = text.partition("=")
            name = next((t for t in takes if t.startswith(name) and len(name) > 3), name)
            flags.long.add(name)
            if eq:
                flags.values.setdefault(name, []).append(val)
            elif name in takes and i < len(words):
                flags.values.setdefault(name, []).append(words[i].text)
                i += 1
            continue
        if text.startswith("-") and len(text) > 1:
            i = _cluster(text[1:], words, i, short_args, flags)
            continue
        flags.operands.append(words[i - 1])
    return flags


def _cluster(cluster: str, words: Sequence[Word], i: int, short_args: str, flags: Flags) -> int:
    for k, ch in enumerate(cluster):
        flags.short.add(ch)
        if ch in short_args:
            rest = cluster[k + 1 :]
            if rest:
                flags.values.setdefault("-" + ch, []).append(rest)
            elif i < len(words):
                flags.values.setdefault("-" + ch, []).append(words[i].text)
                i += 1
            break
    return i


def first_operand(
    words: Sequence[Word], short_args: str = "", long_args: Iterable[str] = ()
) -> tuple[str, list[Word]]:
    """The subcommand (first operand) and the words after it, skipping leading options."""
    takes = set(long_args)
    i = 0
    while i < len(words):
        text = words[i].text
        if text == "--":
            i += 1
            break
        if not text.startswith("-") or text == "-":
            break
        i += 1
        if text.startswith("--"):
            i += text in takes
        elif text[-1] in short_args and len(text) == 2:
            i += 1
    if i >= len(words):
        return "", []
    return words[i].text, list(words[i + 1 :])
