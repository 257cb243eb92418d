"""Walk a parsed script and judge every simple command in it, however deeply nested:
lists, pipelines, substitutions, here-documents, wrappers and nested scripts alike."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from tools.shellsafety.checks import known_names, rules_for, shape_of
from tools.shellsafety.context import Context, shown
from tools.shellsafety.model import Command, Finding, Hit, Redirect, Stdin, Word
from tools.shellsafety.names import DECODERS, DOWNLOADERS
from tools.shellsafety.nodes import assignments, descendants, forks_itself
from tools.shellsafety.parse import (
    ParseFailure,
    fallback_commands,
    heredoc_substitutions,
    is_blank,
    parse,
)
from tools.shellsafety.paths import Scope
from tools.shellsafety.policy import ShellPolicy
from tools.shellsafety.rules_code import judge_code
from tools.shellsafety.scripts import WrittenFiles
from tools.shellsafety.textflow import static_output
from tools.shellsafety.unwrap import unwrap
from tools.shellsafety.words import WordExpander, command_names

MAX_DEPTH = 6  # nested scripts (bash -c "bash -c '...'") deeper than this are not followed
MAX_VARIANTS = 8  # variable-value combinations tried per command
MAX_CHAIN = 24  # wrappers around one command (sudo env nice ...) followed at most
_PARAM_NAME = re.compile(r"!?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*])")


class Analyzer:
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
    ) -> None:
        self.policy, self.depth, self.chain = policy, depth, chain
        self._files = files or WrittenFiles()
        self.findings: list[Finding] = []
        self._scope = scope
        self._values: dict[str, list[str]] = {k: list(v) for k, v in (values or {}).items()}
        self._source = ""
        self._globbing = False  # inside _check_glob_names: do not expand globs again

    def run(self, text: str) -> list[Finding]:
        if is_blank(text):
            return self.findings
        if self.depth > MAX_DEPTH:
            self._add(
                Hit(
                    "ask",
                    "shell code nested too deeply to check",
                    text.strip()[:200],
                    downgradable=False,
                )
            )
            return self.findings
        try:
            trees = parse(text)
        except ParseFailure as exc:
            self._add(
                Hit(
                    "ask",
                    f"the command could not be parsed ({exc})",
                    text.strip()[:500],
                    downgradable=False,
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
        for tree in trees:
            self._node(tree, Stdin())
        return self.findings

    # -- judging one command -------------------------------------------------------------

    def check(self, cmd: Command, chain: tuple[str, ...]) -> None:
        line = cmd.line()
        if len(chain) >= MAX_CHAIN:
            self._add(
                Hit("ask", "commands wrapped too deeply to check", line[:200], downgradable=False)
            )
            innermost = _innermost(cmd)  # still judge what finally runs, without recursing
            for hit in self._builtin(innermost):
                self._add(hit, innermost)
            return
        chain = (*chain, line)
        if pattern := self.policy.match("block", chain):
            self._add(Hit("block", f"matches the shell_extra_block pattern {pattern!r}"), cmd)
            return
        hits = self._builtin(cmd)
        if pattern := self.policy.match("ask", chain):
            hits.append(
                Hit("ask", f"matches the shell_extra_ask pattern {pattern!r}", downgradable=False)
            )
        elif self.policy.match("allow", chain):
            hits = [h for h in hits if h.action == "block" or not h.downgradable]
        for hit in hits:
            self._add(hit, cmd)
        self._run_written(cmd)
        self._files.note(cmd)
        inner = unwrap(cmd)
        for argv in inner.inner:
            self.check(cmd.with_words(argv), chain)
        for script in inner.scripts:
            self._script(script, cmd, chain, _positional(inner.positional))

    def _builtin(self, cmd: Command) -> list[Hit]:
        hits: list[Hit] = []
        if cmd.words and (cmd.words[0].computed or cmd.words[0].has_glob):
            hits.append(
                Hit(
                    "ask",
                    f"the command name is only known at run time "
                    f"({shown([cmd.words[0].text], 60)})",
                    cmd.line(),
                    downgradable=False,
                )
            )
            if cmd.words[0].has_glob and not self._globbing:
                self._check_glob_names(cmd)
        ctx = self._context()
        for rule in rules_for(cmd.name):
            hits.extend(rule(cmd, ctx))
        return hits

    def _run_written(self, cmd: Command) -> None:
        """A file this command line wrote earlier is now run: judge what was written."""
        run = self._files.executed(cmd)
        if run is None:
            return
        fetched = run.file.producers & (DOWNLOADERS | DECODERS)
        if fetched:
            self._add(
                Hit(
                    "ask",
                    f"runs {run.path}, which {', '.join(sorted(fetched))} wrote",
                    downgradable=False,
                ),
                cmd,
            )
        if run.file.content is None:
            return
        if run.kind == "shell":
            self.findings += self._nested(self.chain).run(run.file.content)
        else:
            for hit in judge_code(run.file.content, run.kind, self._context()):
                self._add(hit, cmd)

    def _context(self) -> Context:
        return Context(self._scope, self._analyze)

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
        self, script: Word, cmd: Command, chain: tuple[str, ...], positional: dict[str, list[str]]
    ) -> None:
        if script.dynamic:
            fetched = script.subcommands & (DOWNLOADERS | DECODERS)
            reason = (
                f"runs code produced by {', '.join(sorted(fetched))}"
                if fetched
                else f"runs a command string only known at run time ({shown([script.text])})"
            )
            self._add(Hit("ask", reason, cmd.line(), downgradable=False), cmd)
        self.findings += self._nested(chain, positional).run(script.text)

    def _analyze(self, text: str) -> list[Finding]:
        return self._nested(self.chain).run(text)

    def _nested(
        self, chain: tuple[str, ...], positional: Mapping[str, list[str]] | None = None
    ) -> Analyzer:
        return Analyzer(
            self.policy,
            self._scope,
            depth=self.depth + 1,
            chain=chain,
            values={**self._values, **(positional or {})},
            files=self._files,
        )

    def _add(self, hit: Hit, cmd: Command | None = None) -> None:
        if hit.action == "allow":
            return
        shape = hit.shape if hit.shape is not None else (shape_of(cmd, self._scope) if cmd else "")
        reason = " ".join(hit.reason.split())
        self.findings.append(Finding(hit.action, reason[:300], shape))

    # -- walking the tree ----------------------------------------------------------------

    def _node(self, node: Any, stdin: Stdin) -> str | None:
        """Judge everything under node; return its output when statically known."""
        kind = node.kind
        if kind == "command":
            return self._command(node, stdin)
        if kind == "pipeline":
            self._pipeline(node, stdin)
        elif kind == "function":
            self._function(node)
        elif kind == "compound":
            for child in node.list:
                self._node(child, stdin)
            self._lone_redirects(getattr(node, "redirects", None) or [])
        elif kind in ("list", "if", "for", "while", "until"):
            for child in node.parts:
                self._node(child, stdin)
        elif kind in ("word", "assignment", "redirect"):
            self._inner_code(node)
        return None

    def _pipeline(self, node: Any, stdin: Stdin) -> None:
        stages = [p for p in node.parts if p.kind not in ("pipe", "reservedword")]
        producers = set(stdin.producers)
        current = stdin
        for stage in stages:
            output = self._node(stage, current)
            producers |= command_names(stage)
            current = Stdin(text=output, producers=frozenset(producers), piped=True)

    def _command(self, node: Any, stdin: Stdin) -> str | None:
        for part in node.parts:
            self._inner_code(part)
        word_nodes = [p for p in node.parts if p.kind == "word"]
        redirect_nodes = [p for p in node.parts if p.kind == "redirect"]
        output: str | None = None
        for i, env in enumerate(self._variants(node)):
            expander = self._expander(env)
            words = tuple(w for n in word_nodes for w in expander.words(n))
            redirects, own_stdin = self._redirects(redirect_nodes, expander, stdin)
            cmd = Command(words, redirects, own_stdin)
            self.check(cmd, self.chain)
            if i == 0:
                output = static_output(cmd)
        return output

    def _lone_redirects(self, nodes: list[Any]) -> None:
        for node in nodes:
            self._inner_code(node)
        redirects, _ = self._redirects(nodes, self._expander({}), Stdin())
        self.check(Command((), redirects), self.chain)

    def _function(self, node: Any) -> None:
        name_node = next(p for p in node.parts if p.kind == "word")
        name = self._expander({}).single(name_node).text
        body = node.parts[-1]
        if forks_itself(body, name):
            self._add(
                Hit(
                    "block",
                    f"fork bomb: function {name} starts copies of itself",
                    f"{name}() {{ {name} | {name} & }}",
                )
            )
        self._node(body, Stdin())

    def _inner_code(self, node: Any) -> None:
        """Commands inside $(..), `..`, <(..) and unquoted here-documents of one part."""
        if node.kind in ("commandsubstitution", "processsubstitution"):
            self._node(node.command, Stdin())
            return
        if node.kind == "redirect":
            if getattr(node, "heredoc", None) is not None:
                body, quoted = self._heredoc(node)
                for snippet in [] if quoted else heredoc_substitutions(body):
                    self.findings += self._nested(self.chain).run(snippet)
            elif hasattr(node.output, "kind"):
                self._inner_code(node.output)
            return
        for part in getattr(node, "parts", None) or []:
            self._inner_code(part)

    def _redirects(
        self, nodes: list[Any], expander: WordExpander, stdin: Stdin
    ) -> tuple[tuple[Redirect, ...], Stdin]:
        out: list[Redirect] = []
        for node in nodes:
            op = node.type
            if op in ("<<", "<<-"):
                body, quoted = self._heredoc(node)
                known = quoted or not re.search(r"\$\(|`", body)
                stdin = Stdin(text=body if known else None, piped=True)
                out.append(Redirect(op, None))
                continue
            target = expander.single(node.output) if hasattr(node.output, "kind") else None
            if op == "<<<" and target is not None:
                stdin = Stdin(
                    text=None if target.dynamic else target.text + "\n",
                    producers=target.subcommands,
                    piped=True,
                )
            elif op == "<":
                stdin = Stdin()
            out.append(Redirect(op, target))
        return tuple(out), stdin

    def _heredoc(self, node: Any) -> tuple[str, bool]:
        start, end = node.heredoc.pos
        lines = self._source[start:end].split("\n")
        delimiter_node = node.output
        raw = self._source[node.pos[0] : delimiter_node.pos[1] + 1]
        delimiter = re.sub(r"[\"'\\]", "", self._source[slice(*delimiter_node.pos)]).strip()
        if node.type == "<<-":
            lines = [line.lstrip("\t") for line in lines]
        if lines and lines[-1].strip() == delimiter:
            lines = lines[:-1]
        return "\n".join(lines) + "\n", any(q in raw.split("<<", 1)[-1] for q in "'\"\\")

    # -- variables and directories -------------------------------------------------------

    def _expander(self, env: Mapping[str, str]) -> WordExpander:
        return WordExpander(self._source, env, lambda part: self._substitute(part, env))

    def _substitute(self, part: Any, env: Mapping[str, str]) -> str | None:
        """The output of $(...) when it is fixed: $(echo rm), $(printf '\\x72m')."""
        node = part.command
        stages = (
            [p for p in node.parts if p.kind not in ("pipe", "reservedword")]
            if (node.kind == "pipeline")
            else [node]
        )
        text: str | None = None
        for i, stage in enumerate(stages):
            if stage.kind != "command":
                return None
            expander = self._expander(env)
            words = tuple(w for p in stage.parts if p.kind == "word" for w in expander.words(p))
            stdin = Stdin(text=text, piped=i > 0)
            redirects, stdin = self._redirects(
                [p for p in stage.parts if p.kind == "redirect"], expander, stdin
            )
            text = static_output(Command(words, redirects, stdin))
            if text is None:
                return None
        return text

    def _variants(self, node: Any) -> list[dict[str, str]]:
        referenced = {
            m.group(1)
            for p in descendants(node)
            if p.kind == "parameter"
            if (m := _PARAM_NAME.match(getattr(p, "value", "") or ""))
        }
        # IFS changes how every unquoted expansion splits, referenced or not
        names = sorted((referenced | {"IFS"}) & self._values.keys())
        choices = [[(n, v) for v in self._values[n][:MAX_VARIANTS]] for n in names]
        return [dict(c) for c in itertools.islice(itertools.product(*choices), MAX_VARIANTS)]

    def _collect_values(self, trees: list[Any]) -> None:
        """Literal values assigned anywhere (X=rm; export Y=/; for Z in a b), flow-insensitively."""
        for _ in range(2):  # a second pass resolves values built from other variables
            env = {k: v[0] for k, v in self._values.items() if v}
            expander = self._expander(env)
            for tree in trees:
                for node in descendants(tree):
                    for name, value in assignments(node, expander):
                        known = self._values.setdefault(name, [])
                        if value not in known and len(known) < MAX_VARIANTS:
                            known.append(value)

    def _note_cd(self, node: Any) -> None:
        expander = self._expander({k: v[0] for k, v in self._values.items() if v})
        words = [w for p in node.parts if p.kind == "word" for w in expander.words(p)]
        if words and words[0].text in ("cd", "pushd", "chdir"):
            targets = [w for w in words[1:] if not w.text.startswith("-") or w.text == "-"]
            self._scope = self._scope.with_cd(targets[0] if targets else None)


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
