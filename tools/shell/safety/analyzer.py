"""Judge every simple command of a piece of shell text, however deeply nested: the rules for
it, what it wraps or runs in turn, unknown programs handed a command line, and the shape
under which each finding may be approved."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fnmatch import fnmatchcase

from tools.shell.safety.checks import is_known, known_names, rules_for, starts_command
from tools.shell.safety.context import Context, shown
from tools.shell.safety.exfil import secrets_read
from tools.shell.safety.model import SEVERITY, Command, Finding, Hit, Stdin, Word
from tools.shell.safety.names import DECODERS, DOWNLOADERS
from tools.shell.safety.nodes import descendants
from tools.shell.safety.parse import ParseFailure, fallback_commands, is_blank, parse
from tools.shell.safety.paths import Scope
from tools.shell.safety.pinning import context_change
from tools.shell.safety.policy import ShellPolicy
from tools.shell.safety.rules_code import judge_code
from tools.shell.safety.rules_env import hook_hits
from tools.shell.safety.scripts import WrittenFiles
from tools.shell.safety.shape import exact, quoted, shape_of
from tools.shell.safety.unwrap import unwrap
from tools.shell.safety.walk import MAX_VARIANTS, Walker
from tools.shell.safety.wrappers import Unwrapped

MAX_DEPTH = 6  # nested scripts (bash -c "bash -c '...'") deeper than this are not followed
MAX_CHAIN = 24  # wrappers around one command (sudo env nice ...) followed at most
MAX_PROBES = 4  # suffixes of an unknown program's arguments judged as commands


class Analyzer(Walker):
    """Collects findings for one piece of shell text (and, through recursion, its parts)."""

    def __init__(
        self,
        policy: ShellPolicy,
        scope: Scope,
        *,
        depth: int = 0,
        chain: tuple[str, ...] = (),
        values: Mapping[str, list[str]] | None = None,
        files: WrittenFiles | None = None,
        moving: list[bool] | None = None,
        prefix: tuple[str, ...] = (),
        root: str | None = None,
        unpinned: bool = False,
    ) -> None:
        self.policy, self.depth, self.chain = policy, depth, chain
        self._files = files or WrittenFiles()
        # Set when any command of the whole line depends on run-time values or an unknown
        # directory, allowed or not (shared with nested analyzers; see `moves`).
        self._moving = moving if moving is not None else [False]
        self.findings: list[Finding] = []
        self._scope = scope
        self._values: dict[str, list[str]] = {k: list(v) for k, v in (values or {}).items()}
        self._tainted = {}
        self._env_secrets = frozenset()
        self.read_secrets = set()
        self._source = ""
        self._globbing = False  # inside _check_glob_names: do not expand globs again
        # Shapes of the wrappers this text runs under (sudo, ssh host): part of every shape.
        self.prefix = prefix
        self._root = root  # the whole command as given, the shape of anything run-time
        # Something in the text may change the directory or what a name runs: no shape
        # found here names what will really run (see pinning.py).
        self._unpinned = unpinned

    def run(self, text: str) -> list[Finding]:
        if self._root is None:
            self._root = text
        if is_blank(text):
            return self.findings
        if self.depth > MAX_DEPTH:
            self.add(
                Hit(
                    "ask",
                    "shell code nested too deeply to check",
                    exact(text),
                    downgradable=False,
                    pinned=False,
                )
            )
            return self.findings
        try:
            trees = parse(text)
        except ParseFailure as exc:
            self.add(
                Hit(
                    "ask",
                    f"the command could not be parsed ({exc})",
                    exact(text),
                    downgradable=False,
                    pinned=False,
                )
            )
            for cmd in fallback_commands(text):
                self.check(cmd, self.chain)
            return self.findings
        self._source = text
        self._collect_values(trees)
        for tree in trees:
            for node in descendants(tree):
                if node.kind == "command":
                    self._note_cd(node)
        env = {k: v[0] for k, v in self._values.items() if v}
        self._unpinned = self._unpinned or bool(context_change(trees, self._expander(env)))
        if self._scope.others or self._unpinned:
            self._values.pop("PWD", None)  # where it is by then is not known here
        elif self._scope.start:
            self._values["PWD"] = [self._scope.start]
        for tree in trees:
            self._node(tree, Stdin())
        return self.findings

    # -- judging one command -------------------------------------------------------------

    def check(
        self, cmd: Command, chain: tuple[str, ...], prefix: tuple[str, ...] | None = None
    ) -> frozenset[str]:
        """Judge `cmd` and whatever it runs in turn; return the secret files they read."""
        prefix = self.prefix if prefix is None else prefix
        line = cmd.line()
        if len(chain) >= MAX_CHAIN:
            self._add(
                Hit("ask", "commands wrapped too deeply to check", exact(line), downgradable=False),
                None,
                prefix,
            )
            innermost = _innermost(cmd)  # still judge what finally runs, without recursing
            for hit in self._builtin(innermost):
                self._add(hit, innermost, prefix)
            return frozenset()
        chain = (*chain, line)
        if pattern := self.policy.match("block", chain):
            self._add(
                Hit("block", f"matches the shell_extra_block pattern {pattern!r}"), cmd, prefix
            )
            return frozenset()
        if cmd.dynamic or self._unpinned or not self._scope.known:
            self._moving[0] = True
        hits = self._builtin(cmd)
        if pattern := self.policy.match("ask", chain):
            hits.append(
                Hit("ask", f"matches the shell_extra_ask pattern {pattern!r}", downgradable=False)
            )
        elif self.policy.match("allow", chain):
            hits = [h for h in hits if h.action == "block" or not h.downgradable]
        for hit in hits:
            self._add(hit, cmd, prefix)
        self._run_written(cmd, prefix)
        self._files.note(cmd, lambda: shape_of(cmd, self._scope))
        read = frozenset(s.label for s in secrets_read(cmd, self._context()))
        inner = unwrap(cmd)
        wrapper = (*prefix, _wrapper_shape(cmd, inner, self._scope))
        for argv in inner.inner:
            read |= self.check(cmd.with_words(argv), chain, wrapper)
        for script in inner.scripts:
            read |= self._script(script, cmd, chain, _positional(inner.positional), wrapper)
        if not inner.inner and not inner.scripts:
            self._unknown_program(cmd, chain, prefix)
        return read

    @property
    def moves(self) -> bool:
        """Some command of the line depends on values or a directory only known when it
        runs, so even an allowed line's text does not pin what it does."""
        return self._moving[0]

    def _builtin(self, cmd: Command) -> list[Hit]:
        hits: list[Hit] = []
        if cmd.words and (cmd.words[0].computed or cmd.words[0].has_glob):
            hits.append(
                Hit(
                    "ask",
                    f"the command name is only known at run time "
                    f"({shown([cmd.words[0].text], 60)})",
                    downgradable=False,
                    pinned=False,
                )
            )
            if cmd.words[0].has_glob and not self._globbing:
                self._check_glob_names(cmd)
        ctx = self._context()
        for rule in rules_for(cmd.name):
            hits.extend(rule(cmd, ctx))
        return hits

    def _unknown_program(
        self, cmd: Command, chain: tuple[str, ...], prefix: tuple[str, ...]
    ) -> None:
        """`eatmydata rm -rf /`, `mytool -- sh -c ...`: a program not known here may run the
        rest of its command line, so a dangerous rest is asked for (fail closed)."""
        if not cmd.words or cmd.words[0].computed or is_known(cmd.name):
            return
        probes = 0
        # A lone name is more often a topic than a command (`locate reboot`), so a command
        # needs an argument of its own to be suspected.
        for i, word in enumerate(cmd.words[1:-1], start=1):
            name = word.text.rsplit("/", 1)[-1]
            if word.dynamic or not starts_command(name):
                continue
            probe = Analyzer(
                self.policy, self._scope, depth=self.depth, values=self._values, root=self._root
            )
            probe.check(cmd.with_words(cmd.words[i:]), chain)
            worst = max(probe.findings, key=lambda f: SEVERITY[f.action], default=None)
            if worst is not None:
                rest = shown((w.text for w in cmd.words[i:]), 60)
                self._add(Hit("ask", f"{cmd.name} may run `{rest}`: {worst.reason}"), cmd, prefix)
                return
            probes += 1
            if probes >= MAX_PROBES:
                return

    def _run_written(self, cmd: Command, prefix: tuple[str, ...]) -> None:
        """A file this command line wrote earlier is now run: judge what was written."""
        run = self._files.executed(cmd)
        if run is None:
            return
        # Approving the run names where the file came from (curl -o i.sh <url> => bash i.sh).
        origin = f"{run.file.source} => {shape_of(cmd, self._scope)}"
        fetched = run.file.producers & (DOWNLOADERS | DECODERS)
        if fetched:
            self._add(
                Hit(
                    "ask",
                    f"runs {run.path}, which {', '.join(sorted(fetched))} wrote",
                    origin,
                    downgradable=False,
                ),
                cmd,
                prefix,
            )
        if run.file.content is None:
            return
        if run.kind == "shell":
            self.findings += self._nested(self.chain, prefix=(*prefix, origin)).run(
                run.file.content
            )
        else:
            for hit in judge_code(run.file.content, run.kind, self._context()):
                self._add(hit, cmd, prefix)

    def _context(self) -> Context:
        return Context(self._scope, self._analyze, self.policy.protected)

    def _check_glob_names(self, cmd: Command) -> None:
        """/???/r? may run rm: judge the command as each known name the glob matches."""
        if not re.search(r"[A-Za-z0-9]", cmd.name):
            return  # matches anything; the ask above is all that can be said
        names = sorted(n for n in known_names() if fnmatchcase(n, cmd.name))[:MAX_VARIANTS]
        self._globbing = True
        try:
            for name in names:
                self.check(cmd.with_words((Word.literal(name), *cmd.words[1:])), self.chain)
        finally:
            self._globbing = False

    def _script(
        self,
        script: Word,
        cmd: Command,
        chain: tuple[str, ...],
        positional: dict[str, list[str]],
        prefix: tuple[str, ...],
    ) -> frozenset[str]:
        if script.dynamic:
            fetched = script.subcommands & (DOWNLOADERS | DECODERS)
            reason = (
                f"runs code produced by {', '.join(sorted(fetched))}"
                if fetched
                else f"runs a command string only known at run time ({shown([script.text])})"
            )
            self._add(Hit("ask", reason, downgradable=False), cmd, prefix[:-1])
        nested = self._nested(chain, positional, prefix)
        self.findings += nested.run(script.text)
        return frozenset(nested.read_secrets)

    def _analyze(self, text: str) -> list[Finding]:
        return self._nested(self.chain).run(text)

    def nested_run(self, text: str) -> frozenset[str]:
        nested = self._nested(self.chain)
        self.findings += nested.run(text)
        return frozenset(nested.read_secrets)

    def hook(self, name: str, value: Word, cmd: Command) -> None:
        for hit in hook_hits(name, value, self._context()):
            shape = f"{name}={quoted(value.raw or value.text)} {shape_of(cmd, self._scope)}"
            self._add(Hit(hit.action, hit.reason, shape, hit.downgradable), cmd, self.prefix)

    def _nested(
        self,
        chain: tuple[str, ...],
        positional: Mapping[str, list[str]] | None = None,
        prefix: tuple[str, ...] | None = None,
    ) -> Analyzer:
        return Analyzer(
            self.policy,
            self._scope,
            depth=self.depth + 1,
            chain=chain,
            values={**self._values, **(positional or {})},
            files=self._files,
            moving=self._moving,
            prefix=self.prefix if prefix is None else prefix,
            root=self._root,
            unpinned=self._unpinned,
        )

    def add(self, hit: Hit, cmd: Command | None = None) -> None:
        self._add(hit, cmd, self.prefix)

    def _add(self, hit: Hit, cmd: Command | None, prefix: tuple[str, ...]) -> None:
        if hit.action == "allow":
            return
        if cmd is not None and cmd.dynamic:
            # What runs depends on values only known at run time: only the very same
            # command line may share the approval.
            shape = exact(self._root or "")
        elif hit.shape is not None:
            shape = " ".join([*prefix, hit.shape])
        elif cmd is None:
            shape = " ".join(prefix)
        else:
            # What a command reads on a pipe is part of what was approved (echo .. | psql).
            feed = cmd.stdin.upstream if cmd.stdin.piped else ()
            shape = " ".join([*prefix, " | ".join([*feed, shape_of(cmd, self._scope)])])
        reason = " ".join(hit.reason.split())
        pinned = (
            hit.pinned
            and not self._unpinned
            and self._scope.known
            and not (cmd is not None and cmd.dynamic)
        )
        self.findings.append(Finding(hit.action, reason[:300], shape.strip(), pinned))


def _wrapper_shape(cmd: Command, inner: Unwrapped, scope: Scope) -> str:
    """The wrapper's own part of a command (`sudo -u root` of `sudo -u root rm x`)."""
    if len(inner.inner) == 1 and not inner.scripts:
        argv = inner.inner[0]
        if argv and cmd.words[-len(argv) :] == argv:
            return shape_of(cmd.with_words(cmd.words[: len(cmd.words) - len(argv)]), scope)
    for script in inner.scripts[:1]:
        if script in cmd.words:
            return shape_of(cmd.with_words(cmd.words[: cmd.words.index(script)]), scope)
    return shape_of(cmd, scope)


def _innermost(cmd: Command) -> Command:
    """Peel single-command wrappers (nice nice ... rm) iteratively."""
    for _ in range(10_000):
        inner = unwrap(cmd).inner
        if len(inner) != 1 or not inner[0]:
            break
        cmd = cmd.with_words(inner[0])
    return cmd


def _positional(words: tuple[Word, ...]) -> dict[str, list[str]]:
    """$0, $1 ... and $@ of a script run as `sh -c script arg0 arg1 ...`."""
    values = {str(i): [w.text] for i, w in enumerate(words) if not w.dynamic}
    if len(words) > 1 and not any(w.dynamic for w in words[1:]):
        values["@"] = values["*"] = [" ".join(w.text for w in words[1:])]
    return values
