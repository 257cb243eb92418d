"""Walk a parsed script down to its simple commands: expand their words, follow pipelines,
substitutions, here-documents and variables, and track what flows between commands (text
known in advance, the commands feeding a pipe, secret files read along the way)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tools.shell.safety.model import Command, Hit, Redirect, Stdin, Word
from tools.shell.safety.nodes import assignments, forks_itself
from tools.shell.safety.paths import Scope
from tools.shell.safety.shape import exact, shape_of
from tools.shell.safety.syntax import Node, descendants
from tools.shell.safety.textflow import static_output
from tools.shell.safety.words import WordExpander, command_names

MAX_VARIANTS = 8  # variable-value combinations tried per command
_DECLARERS = frozenset({"export", "declare", "local", "readonly", "typeset"})
_WRITER = frozenset({"the command writing to >(...)"})
_PARAM_NAME = re.compile(r"!?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*])")


@dataclass(frozen=True)
class Out:
    """What a piece of script hands on: its output if known, the secrets in it, its shapes."""

    text: str | None = None
    secrets: frozenset[str] = field(default_factory=frozenset)
    lines: tuple[str, ...] = ()


class Walker:
    """Base of the analyzer: calls `check` on every simple command, in order."""

    chain: tuple[str, ...]  # the outer commands' lines, for operator patterns
    _scope: Scope
    _source: str
    _values: dict[str, list[str]]
    _tainted: dict[str, frozenset[str]]  # variables holding secrets: K=$(cat ~/.ssh/id_rsa)
    _env_secrets: frozenset[str]  # secrets loaded into the environment (source .env)
    read_secrets: set[str]  # every secret read here, for an enclosing pipeline

    # -- provided by the analyzer --------------------------------------------------------

    def check(self, cmd: Command, chain: tuple[str, ...]) -> frozenset[str]:
        raise NotImplementedError

    def add(self, hit: Hit, cmd: Command | None = None) -> None:
        raise NotImplementedError

    def nested_run(self, text: str) -> frozenset[str]:
        """Judge `text` as shell code one level deeper; the secrets it reads."""
        raise NotImplementedError

    def hook(self, name: str, value: Word, cmd: Command) -> None:
        """An assignment NAME=value made for or before `cmd`."""
        raise NotImplementedError

    # -- the tree ------------------------------------------------------------------------

    def _node(self, node: Node, stdin: Stdin, *, feeds: bool = False) -> Out:
        """Judge everything under node; return what it hands on (`feeds`: a pipe reads it,
        so its shape is wanted)."""
        kind = node.kind
        if kind == "command":
            return self._command(node, stdin, feeds)
        if kind == "pipeline":
            return self._pipeline(node, stdin)
        secrets: frozenset[str] = frozenset()
        if kind == "function":
            self._function(node)
        elif kind == "compound":
            for child in node.parts:
                if child.kind != "redirect":
                    secrets |= self._node(child, stdin).secrets
            secrets |= self._lone_redirects([p for p in node.parts if p.kind == "redirect"])
        elif kind in ("list", "group", "for", "test"):
            for child in node.parts:
                secrets |= self._node(child, stdin).secrets
        elif kind != "operator":
            secrets |= self._inner_code(node)
        start, end = node.pos
        return Out(None, secrets, (" ".join(self._source[start:end].split()),))

    def _pipeline(self, node: Node, stdin: Stdin) -> Out:
        stages = node.parts
        producers = set(stdin.producers)
        secrets, lines = stdin.secrets, stdin.upstream
        current = stdin
        for i, stage in enumerate(stages):
            out = self._node(stage, current, feeds=i < len(stages) - 1)
            producers |= command_names(stage)
            secrets |= out.secrets
            lines = (*lines, *out.lines)
            current = Stdin(
                text=out.text,
                producers=frozenset(producers),
                piped=True,
                upstream=lines,
                secrets=secrets,
            )
        return Out(None, secrets, lines)

    def _command(self, node: Node, stdin: Stdin, feeds: bool = False) -> Out:
        fed: frozenset[str] = frozenset()
        tainted: list[str] = []
        for part in node.parts:
            found = self._inner_code(part)
            fed |= found
            if found and part.kind == "assignment":
                tainted.append(part.text.split("=", 1)[0].rstrip("+"))
        fed |= self._tainted_references(node)
        word_nodes = [p for p in node.parts if p.kind == "word"]
        redirect_nodes = [p for p in node.parts if p.kind == "redirect"]
        assign_nodes = [p for p in node.parts if p.kind == "assignment"]
        out = Out()
        for i, env in enumerate(self._variants(node)):
            expander = self._expander(env)
            words = tuple(w for n in word_nodes for w in expander.words(n))
            redirects, own_stdin = self._redirects(redirect_nodes, expander, stdin)
            # After `source .env`, any value known only at run time may hold its secrets.
            carried = self._env_secrets if any(w.dynamic for w in words) else frozenset()
            cmd = Command(words, redirects, own_stdin, secrets=fed | carried)
            for assign in assign_nodes if i == 0 else []:
                value = expander.single(assign)
                name, _, text = value.text.partition("=")
                self.hook(name.rstrip("+"), _value_word(value, text), cmd)
            read = self.check(cmd, self.chain)
            if i == 0:
                secrets = own_stdin.secrets | fed | read
                lines = (shape_of(cmd, self._scope),) if feeds else ()
                out = Out(static_output(cmd), secrets, lines)
                if fed and cmd.name in _DECLARERS:  # export K=$(cat ~/.ssh/id_rsa)
                    tainted += [w.text.split("=", 1)[0] for w in cmd.words[1:] if "=" in w.text]
                    if any(w.dynamic for w in cmd.words[1:]):  # export $(cat .env | xargs)
                        self._env_secrets |= fed
                if read and cmd.name in ("source", "."):
                    self._env_secrets |= read
        for name in tainted:
            self._tainted[name] = self._tainted.get(name, frozenset()) | fed
        self.read_secrets |= out.secrets
        return out

    def _tainted_references(self, node: Node) -> frozenset[str]:
        found: frozenset[str] = frozenset()
        if not self._tainted:
            return found
        for part in descendants(node):
            if part.kind == "parameter":
                m = _PARAM_NAME.match(part.text)
                if m and m.group(1) in self._tainted:
                    found |= self._tainted[m.group(1)]
        return found

    def _lone_redirects(self, nodes: list[Node]) -> frozenset[str]:
        secrets: frozenset[str] = frozenset()
        for node in nodes:
            secrets |= self._inner_code(node)
        redirects, _ = self._redirects(nodes, self._expander({}), Stdin())
        return secrets | self.check(Command((), redirects), self.chain)

    def _function(self, node: Node) -> None:
        name = self._expander({}).single(node.parts[0]).text
        body = node.parts[-1]
        if forks_itself(body, name):
            self.add(
                Hit(
                    "block",
                    f"fork bomb: function {name} starts copies of itself",
                    f"{name}() {{ {name} | {name} & }}",
                )
            )
        self._node(body, Stdin())

    def _inner_code(self, node: Node) -> frozenset[str]:
        """Judge commands inside $(..), `..`, <(..) and unquoted here-documents of one part;
        the secrets they read, which flow into the command the part belongs to."""
        if node.kind == "processsubstitution" and node.text == ">":
            # >(sh): the commands inside read whatever the outer command writes there
            fed = Stdin(piped=True, producers=_WRITER, upstream=(exact(self._source),))
            return self._node(node.parts[0], fed).secrets
        if node.kind in ("commandsubstitution", "processsubstitution"):
            return self._node(node.parts[0], Stdin()).secrets
        secrets: frozenset[str] = frozenset()
        for part in node.parts:
            secrets |= self._inner_code(part)
        if node.target is not None:
            secrets |= self._inner_code(node.target)
        return secrets

    def _redirects(
        self, nodes: list[Node], expander: WordExpander, stdin: Stdin
    ) -> tuple[tuple[Redirect, ...], Stdin]:
        out: list[Redirect] = []
        for node in nodes:
            op = node.text
            if node.heredoc is not None:
                body, quoted = node.heredoc.body, node.heredoc.quoted
                known = quoted or not any(p.kind == "commandsubstitution" for p in node.parts)
                feed = f"<< {exact(repr(body))}"
                stdin = Stdin(text=body if known else None, piped=True, upstream=(feed,))
                out.append(Redirect(op, None))
                continue
            target = expander.single(node.target) if node.target is not None else None
            if op == "<<<" and target is not None:
                stdin = Stdin(
                    text=None if target.dynamic else target.text + "\n",
                    producers=target.subcommands,
                    piped=True,
                    upstream=(f"<<< {target.raw or target.text!r}",),
                )
            elif op == "<" and target is not None and target.procsub:
                # `bash < <(curl ...)`: fed by the commands of the substitution
                stdin = Stdin(producers=target.subcommands, piped=True, upstream=(target.raw,))
            elif op == "<":
                stdin = Stdin()
            out.append(Redirect(op, target))
        return tuple(out), stdin

    # -- variables and directories -------------------------------------------------------

    def _expander(self, env: Mapping[str, str]) -> WordExpander:
        return WordExpander(self._source, env, lambda part: self._substitute(part, env))

    def _substitute(self, part: Node, env: Mapping[str, str]) -> str | None:
        """The output of $(...) when it is fixed: $(echo rm), $(printf '\\x72m')."""
        body = part.parts[0]
        if len(body.parts) != 1:
            return None
        node = body.parts[0]
        stages = node.parts if node.kind == "pipeline" else (node,)
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

    def _variants(self, node: Node) -> list[dict[str, str]]:
        referenced = {
            m.group(1)
            for p in descendants(node)
            if p.kind == "parameter"
            if (m := _PARAM_NAME.match(p.text))
        }
        # IFS changes how every unquoted expansion splits, referenced or not
        names = sorted((referenced | {"IFS"}) & self._values.keys())
        choices = [[(n, v) for v in self._values[n][:MAX_VARIANTS]] for n in names]
        return [dict(c) for c in itertools.islice(itertools.product(*choices), MAX_VARIANTS)]

    def _collect_values(self, trees: list[Node]) -> None:
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

    def _note_cd(self, node: Node) -> None:
        expander = self._expander({k: v[0] for k, v in self._values.items() if v})
        words = [w for p in node.parts if p.kind == "word" for w in expander.words(p)]
        if words and words[0].text in ("cd", "pushd", "chdir"):
            targets = [w for w in words[1:] if not w.text.startswith("-") or w.text == "-"]
            self._scope = self._scope.with_cd(targets[0] if targets else None)


def _value_word(assignment: Word, value: str) -> Word:
    return Word(
        text=value,
        pattern=value,
        dynamic=assignment.dynamic,
        computed=assignment.computed,
        subcommands=assignment.subcommands,
        raw=assignment.raw.split("=", 1)[-1],
    )
