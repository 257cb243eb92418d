"""Value types shared by the shell-safety checks: verdicts, findings, words and commands."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Literal

Action = Literal["allow", "ask", "block"]
SEVERITY: dict[Action, int] = {"allow": 0, "ask": 1, "block": 2}


@dataclass(frozen=True)
class Verdict:
    """What may happen to a command: run it, ask a person first, or never run it."""

    action: Action
    reason: str  # one line naming the worst thing found
    # A normalised form of the risky parts (e.g. "rm -f -r /ws/build"): approving it may
    # pre-approve later commands of the same shape for the session, so it names the exact
    # targets (see the package docstring).
    shape: str = ""
    # False when what it touches is only known when it runs (a target from $(cat list), a
    # directory changed by eval or a sourced file, a redefined command): then no standing
    # approval may cover it, and it is asked for each time.
    standing: bool = True
    # Each target path (absolute) and where it led through symbolic links when judged (with
    # `resolve_links`): the command starts only if they still lead there.
    pins: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Hit:
    """One rule's opinion of one command."""

    action: Action
    reason: str
    shape: str | None = None  # None: the shape of the command the rule looked at
    # False for fail-closed asks (unparseable or computed code) that an allow pattern
    # must not wave through.
    downgradable: bool = True
    pinned: bool = True  # False: its shape cannot name what will really run (see Verdict)


@dataclass(frozen=True)
class Finding:
    action: Action
    reason: str
    shape: str
    pinned: bool = True


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal and the expansions that can be known statically."""

    text: str  # unknown expansions kept as written, e.g. "$DIR/x"
    pattern: str = ""  # unknown expansions as "*", for matching paths
    dynamic: bool = False  # contains something only known at run time
    computed: bool = False  # contains any expansion, even one resolved here
    # Names of commands run inside $(..), `..` or <(..) within this word.
    subcommands: frozenset[str] = field(default_factory=frozenset)
    procsub: bool = False  # a process substitution <(..): a /dev/fd path fed by a command
    raw: str = ""  # the word as written, kept for computed words (shapes show it exactly)

    def __post_init__(self) -> None:
        if not self.pattern:
            object.__setattr__(self, "pattern", self.text)

    @classmethod
    def literal(cls, text: str) -> Word:
        return cls(text=text, pattern=text)

    @property
    def has_glob(self) -> bool:
        """Wildcards that could match other names (`[` alone, as in `[ -f x ]`, is not one)."""
        return bool(re.search(r"[*?]|\[[^\]]*\]", self.pattern))


@dataclass(frozen=True)
class Redirect:
    op: str  # ">", ">>", "&>", "<", "<<", "<<<", ">&" ...
    target: Word | None  # None when duplicating a file descriptor (2>&1)

    @property
    def writes(self) -> bool:
        return self.target is not None and (">" in self.op or self.op == "<>")


@dataclass(frozen=True)
class Stdin:
    """What a command reads on standard input, as far as can be known before it runs."""

    text: str | None = None  # statically known content (echo ... |, here-docs)
    producers: frozenset[str] = field(default_factory=frozenset)  # upstream command names
    piped: bool = False  # fed by a pipe or here-doc rather than /dev/null or a file
    upstream: tuple[str, ...] = ()  # shapes of the commands feeding it, for exact approvals
    secrets: frozenset[str] = field(default_factory=frozenset)  # secret files it carries


@dataclass(frozen=True)
class Command:
    """One simple command as it will run: argv words, its redirects and its input."""

    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...] = ()
    stdin: Stdin = field(default_factory=Stdin)
    # Secret files whose content reaches the arguments ($(cat ~/.ssh/id_rsa), tainted $VARs).
    secrets: frozenset[str] = field(default_factory=frozenset)

    @property
    def name(self) -> str:
        """The command name without a path (`/bin/rm` and `./rm` are both `rm`)."""
        if not self.words:
            return ""
        return posixpath.basename(self.words[0].text.rstrip("/")) or self.words[0].text

    @property
    def args(self) -> tuple[str, ...]:
        return tuple(word.text for word in self.words[1:])

    def line(self) -> str:
        """Words joined by spaces with the name normalised; what extra patterns match."""
        return " ".join([self.name, *self.args]) if self.words else ""

    @property
    def dynamic(self) -> bool:
        """Some word or redirect target is only known at run time."""
        return any(w.dynamic for w in self.words) or any(
            r.target is not None and r.target.dynamic for r in self.redirects
        )

    def with_words(self, words: tuple[Word, ...]) -> Command:
        return Command(words=words, redirects=(), stdin=self.stdin, secrets=self.secrets)


def worst(findings: list[Finding]) -> Finding | None:
    if not findings:
        return None
    return max(findings, key=lambda f: SEVERITY[f.action])
