"""Parse shell text with tree-sitter-bash into the small syntax tree the checks walk: lists,
pipelines, simple commands with their words, assignments and redirects, and the code nested
in substitutions. Text with any syntax error (an ERROR or MISSING node) is refused."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

MAX_SOURCE_CHARS = 40_000  # longer text is not parsed: its commands are asked for
MAX_NESTING = 150  # syntax nested deeper than this is refused rather than walked

# Statement kinds of tree-sitter-bash and the tokens that separate statements.
_SEPARATORS = frozenset({";", "&", "&&", "||", "|", "|&", ";;", ";&", ";;&"})
_CONTAINERS = frozenset(
    {
        "program",
        "compound_statement",
        "subshell",
        "do_group",
        "if_statement",
        "elif_clause",
        "else_clause",
        "while_statement",
        "case_statement",
        "case_item",
        "c_style_for_statement",
        "negated_command",
        "test_command",
        "binary_expression",
        "unary_expression",
        "parenthesized_expression",
        "ternary_expression",
        "postfix_expression",
    }
)
_COMPOUNDS = frozenset({"compound_statement", "subshell"})
_EXPANSIONS = frozenset(
    {
        "simple_expansion",
        "expansion",
        "command_substitution",
        "process_substitution",
        "arithmetic_expansion",
    }
)
_SKIPPED = frozenset({"comment", "heredoc_start", "heredoc_end", "file_descriptor"})


class ParseFailure(Exception):
    """The text is not valid bash as far as the parser knows; the message says where."""


@dataclass(frozen=True)
class Heredoc:
    body: str  # the document's text, leading tabs removed for <<-
    quoted: bool  # <<'EOF': nothing in the body is expanded


@dataclass(frozen=True)
class Node:
    """One piece of syntax; `pos` are character offsets into the parsed text.

    kinds: list (statements and `operator`s), pipeline (its stages), command (`word`,
    `assignment` and `redirect` parts), compound ({ } or ( ) with its statements and
    redirects), function (name word, body), for (variable word, item words, body), test
    ([ ] and [[ ]]), group (any other construct: statements and words), and inside words:
    parameter ($X, ${X..}: `text` is what is inside), commandsubstitution,
    processsubstitution (`text` "<" or ">"), arithmetic.
    """

    kind: str
    pos: tuple[int, int]
    parts: tuple[Node, ...] = ()
    text: str = ""  # operator, redirect operator, parameter expression, assignment source
    target: Node | None = None  # the word a redirect opens (None: a descriptor, 2>&1)
    heredoc: Heredoc | None = None


def parse(text: str) -> list[Node]:
    """The top-level statements of `text`; raises ParseFailure when it is not valid bash."""
    if len(text) > MAX_SOURCE_CHARS:
        raise ParseFailure(f"longer than {MAX_SOURCE_CHARS:,} characters")
    data = text.encode("utf-8", "surrogatepass")
    tree = _parser().parse(_ascii_stand_in(text, data))
    root = tree.root_node
    if root.has_error:
        raise ParseFailure(_where_error(root, data))
    builder = _Builder(text, data)
    return list(builder.sequence(root, 0).parts)


def _ascii_stand_in(text: str, data: bytes) -> bytes:
    """`data` with every non-ASCII character replaced by as many `%` as it has bytes.

    tree-sitter-bash 0.25's scanner crashes the process (a segfault, now and then) on some
    code points (`{` then U+BE8C5 U+19044 is one), so it never sees any. Bash's syntax is
    all ASCII and a non-ASCII character is part of a word, as `%` is: the tree keeps its
    shape and byte offsets, and the words' text comes from `data`. `%` is no name
    character, so `é=1 cmd` stays a command named `é=1`, as bash runs it, not an assignment.
    """
    if len(data) == len(text):
        return data
    return b"".join(
        ch.encode() if ch < "\x80" else b"%" * len(ch.encode("utf-8", "surrogatepass"))
        for ch in text
    )


def descendants(node: Node) -> list[Node]:
    """Every node under `node`, itself included (redirect targets too)."""
    found: list[Node] = []
    stack = [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.parts)
        if current.target is not None:
            stack.append(current.target)
    return found


@cache
def _parser() -> Any:
    # Imported at the first command, not with the gateway, so process start stays quick.
    import tree_sitter
    import tree_sitter_bash

    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def _where_error(root: Any, data: bytes) -> str:
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_missing:
            return f"missing {node.type!r}"
        if node.type == "ERROR":
            near = data[node.start_byte : node.start_byte + 20].decode("utf-8", "replace")
            return f"syntax error near {near.splitlines()[0] if near.strip() else 'the end'!r}"
        stack.extend(reversed(node.children))
    return "syntax error"


class _Builder:
    """Turns tree-sitter nodes into `Node`s, with character offsets."""

    def __init__(self, text: str, data: bytes) -> None:
        self.text = text
        self._ascii = len(data) == len(text)
        if not self._ascii:
            offsets = [0] * (len(data) + 1)
            at = 0
            for i, ch in enumerate(text):
                width = len(ch.encode("utf-8", "surrogatepass"))
                for k in range(width):
                    offsets[at + k] = i
                at += width
            offsets[at] = len(text)
            self._offsets = offsets

    def pos(self, node: Any) -> tuple[int, int]:
        if self._ascii:
            return node.start_byte, node.end_byte
        return self._offsets[node.start_byte], self._offsets[node.end_byte]

    def source(self, node: Any) -> str:
        start, end = self.pos(node)
        return self.text[start:end]

    # -- statements ------------------------------------------------------------------------

    def sequence(self, node: Any, depth: int) -> Node:
        """The statements of a container, separated by operators, as one list."""
        return Node("list", self.pos(node), tuple(self._items(node.children, depth + 1)))

    def _items(self, children: list[Any], depth: int) -> list[Node]:
        items: list[Node] = []
        for child in children:
            if child.type in _SEPARATORS:
                items.append(Node("operator", self.pos(child), text=child.type))
            elif child.is_named and child.type not in _SKIPPED:
                items.append(self.statement(child, depth))
        return items

    def statement(self, node: Any, depth: int) -> Node:
        if depth > MAX_NESTING:
            raise ParseFailure("nested too deeply")
        kind = node.type
        if kind == "command":
            return self._command(node, depth)
        if kind in ("variable_assignment", "variable_assignments"):
            assigns = [node] if kind == "variable_assignment" else list(node.named_children)
            parts = tuple(self._assignment(a, depth) for a in assigns)
            return Node("command", self.pos(node), parts)
        if kind in ("declaration_command", "unset_command"):
            return self._declaration(node, depth)
        if kind == "redirected_statement":
            return self._redirected(node, depth)
        if kind == "pipeline":
            stages = [c for c in node.children if c.is_named and c.type not in _SKIPPED]
            return Node(
                "pipeline", self.pos(node), tuple(self.statement(s, depth + 1) for s in stages)
            )
        if kind == "list":
            return self.sequence(node, depth)
        if kind in _COMPOUNDS:
            return Node("compound", self.pos(node), (self.sequence(node, depth),))
        if kind == "function_definition":
            name = node.child_by_field_name("name")
            body = node.child_by_field_name("body")
            parts = (self.word([name], depth), self.statement(body, depth + 1))
            return Node("function", self.pos(node), parts)
        if kind == "for_statement":
            return self._for(node, depth)
        if kind in _CONTAINERS:
            parts = tuple(self._group(node.children, depth + 1))
            return Node("test" if kind == "test_command" else "group", self.pos(node), parts)
        return self.word([node], depth)

    def _group(self, children: list[Any], depth: int) -> list[Node]:
        out: list[Node] = []
        for child in children:
            if not child.is_named or child.type in _SKIPPED:
                if child.type in _SEPARATORS:
                    out.append(Node("operator", self.pos(child), text=child.type))
                continue
            out.append(self.statement(child, depth))
        return out

    def _for(self, node: Any, depth: int) -> Node:
        variable = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        values = [
            c for c in node.children_by_field_name("value") if c.is_named and c.type not in _SKIPPED
        ]
        parts = [self.word([variable], depth)] if variable is not None else []
        parts += [self.word([v], depth) for v in values]
        if body is not None:
            parts.append(self.statement(body, depth + 1))
        return Node("for", self.pos(node), tuple(parts))

    def _command(self, node: Any, depth: int) -> Node:
        parts: list[Node] = []
        run: list[Any] = []  # adjacent pieces of one word ($"..." comes as `$` and a string)
        for child in node.children:
            if child.type == "command_name":
                child = child.named_children[0] if child.named_children else child
            if child.type == "variable_assignment":
                parts.append(self._assignment(child, depth))
                continue
            if child.type.endswith("_redirect"):
                parts.extend(self._redirect(child, depth))
                continue
            if child.type in _SKIPPED or child.type == "comment":
                continue
            if run and self.pos(run[-1])[1] != self.pos(child)[0]:
                parts.append(self.word(run, depth))
                run = []
            run.append(child)
        if run:
            parts.append(self.word(run, depth))
        return Node("command", self.pos(node), tuple(self._ordered(parts)))

    @staticmethod
    def _ordered(parts: list[Node]) -> list[Node]:
        return sorted(parts, key=lambda p: p.pos[0])

    def _declaration(self, node: Any, depth: int) -> Node:
        """export K=v, local x, unset y: a command whose words are the keyword and its
        arguments as written (an assignment is one word, `K=v`)."""
        parts: list[Node] = []
        for child in node.children:
            if child.type in _SKIPPED:
                continue
            if child.type.endswith("_redirect"):
                parts.extend(self._redirect(child, depth))
            else:
                parts.append(self.word([child], depth))
        return Node("command", self.pos(node), tuple(parts))

    def _assignment(self, node: Any, depth: int) -> Node:
        return Node(
            "assignment",
            self.pos(node),
            tuple(self._expansions(node, depth)),
            text=self.source(node),
        )

    def _redirected(self, node: Any, depth: int) -> Node:
        """A statement with redirects. They belong to the simple command just before them
        (`a && cat > f` redirects cat), or to a compound statement as a whole; a heredoc's
        line may go on after it (`cat <<EOF | sh`), which the parser keeps inside it."""
        body_node = node.child_by_field_name("body")
        redirects: list[Node] = []
        tail: list[Node] = []
        for child in node.children:
            if child.type.endswith("_redirect"):
                redirects.extend(self._redirect(child, depth))
                if child.type == "heredoc_redirect":
                    tail.extend(self._heredoc_tail(child, depth))
        if body_node is None:
            body = Node("command", self.pos(node), tuple(redirects))
        else:
            body = self._attach(self.statement(body_node, depth + 1), redirects)
        if not tail:
            return body
        return _assemble([body, *tail], self.pos(node))

    def _attach(self, body: Node, redirects: list[Node]) -> Node:
        if not redirects:
            return body
        if body.kind in ("list", "pipeline") and body.parts:
            last = body.parts[-1]
            return Node(body.kind, body.pos, (*body.parts[:-1], self._attach(last, redirects)))
        if body.kind == "command":
            return Node("command", body.pos, tuple(self._ordered([*body.parts, *redirects])))
        if body.kind == "compound":
            return Node("compound", body.pos, (*body.parts, *redirects))
        return Node("compound", body.pos, (body, *redirects))

    def _heredoc_tail(self, node: Any, depth: int) -> list[Node]:
        """What follows `<<EOF` on its line: operators and statements (not redirects)."""
        out: list[Node] = []
        for child in node.children:
            kind = child.type
            if kind in _SEPARATORS:
                out.append(Node("operator", self.pos(child), text=kind))
            elif kind == "pipeline" and child.children and child.children[0].type == "|":
                out.append(Node("operator", self.pos(child.children[0]), text="|"))
                rest = list(child.children[1:])
                out.extend(_flatten(self._group(rest, depth + 1)))
            elif (
                child.is_named
                and not kind.endswith("_redirect")
                and kind
                not in (
                    *_SKIPPED,
                    "heredoc_body",
                )
            ):
                out.extend(_flatten([self.statement(child, depth + 1)]))
        return out

    def _redirect(self, node: Any, depth: int) -> list[Node]:
        kind = node.type
        pos = self.pos(node)
        if kind == "heredoc_redirect":
            # Redirects written after `<<EOF` on its line are kept inside it by the parser.
            more: list[Node] = []
            for child in node.children:
                if child.type in _SEPARATORS or child.type in ("pipeline", "list", "command"):
                    break
                if child.type.endswith("_redirect"):
                    more.extend(self._redirect(child, depth + 1))
            return [self._heredoc(node, depth), *more]
        op = next((c.type for c in node.children if not c.is_named), "")
        destinations = node.children_by_field_name("destination") or [
            c for c in node.named_children if c.type not in _SKIPPED
        ]
        if kind == "herestring_redirect":
            op = "<<<"
        if not destinations:
            return [Node("redirect", pos, text=op)]
        target = self.word(destinations, depth)
        duplicate = op in (">&", "<&") and self.source(destinations[0]).isdigit()
        if duplicate or op in (">&-", "<&-"):
            return [Node("redirect", pos, target.parts, text=op)]
        return [Node("redirect", pos, text=op, target=target)]

    def _heredoc(self, node: Any, depth: int) -> Node:
        op = "<<-" if any(c.type == "<<-" for c in node.children) else "<<"
        start = next((c for c in node.children if c.type == "heredoc_start"), None)
        body = next((c for c in node.children if c.type == "heredoc_body"), None)
        quoted = start is not None and any(q in self.source(start) for q in "'\"\\")
        text = self.source(body) if body is not None else ""
        if body is not None:
            end = next((c for c in node.children if c.type == "heredoc_end"), None)
            if end is not None:  # the body node may stop before the closing line's tabs
                text = self.text[self.pos(body)[0] : self.pos(end)[0]]
        lines = text.split("\n")
        if op == "<<-":
            lines = [line.lstrip("\t") for line in lines]
        text = "\n".join(lines)
        text = text if text.endswith("\n") or not text else text + "\n"
        inner = () if quoted or body is None else tuple(self._expansions(body, depth))
        return Node("redirect", self.pos(node), inner, text=op, heredoc=Heredoc(text, quoted))

    # -- words -----------------------------------------------------------------------------

    def word(self, pieces: list[Any], depth: int) -> Node:
        """One shell word made of adjacent pieces; its parts are the expansions in it."""
        start, end = self.pos(pieces[0])[0], self.pos(pieces[-1])[1]
        found: list[Node] = []
        for piece in pieces:
            found += self._expansions(piece, depth)
        return Node("word", (start, end), tuple(found), text=self.text[start:end])

    def _expansions(self, node: Any, depth: int) -> list[Node]:
        """The outermost expansions under `node`, each with the code nested in it."""
        if depth > MAX_NESTING:
            raise ParseFailure("nested too deeply")
        kind = node.type
        if kind in ("simple_expansion", "expansion"):
            inside = self.source(node)
            inside = inside[2:-1] if inside.startswith("${") else inside[1:]
            nested = [e for c in node.children for e in self._expansions(c, depth + 1)]
            return [Node("parameter", self.pos(node), tuple(nested), text=inside)]
        if kind == "command_substitution":
            body = Node("list", self.pos(node), tuple(self._items(node.children, depth + 1)))
            return [Node("commandsubstitution", self.pos(node), (body,))]
        if kind == "process_substitution":
            body = Node("list", self.pos(node), tuple(self._items(node.children, depth + 1)))
            direction = self.source(node)[:1]
            return [Node("processsubstitution", self.pos(node), (body,), text=direction)]
        if kind == "arithmetic_expansion":
            nested = [e for c in node.children for e in self._expansions(c, depth + 1)]
            return [Node("arithmetic", self.pos(node), tuple(nested))]
        if kind in ("raw_string", "ansi_c_string"):
            return []
        return [e for c in node.children for e in self._expansions(c, depth + 1)]


def _flatten(nodes: list[Node]) -> list[Node]:
    """Lists and pipelines opened up into their statements and operators."""
    out: list[Node] = []
    for node in nodes:
        if node.kind == "list":
            out.extend(_flatten(list(node.parts)))
        elif node.kind == "pipeline":
            for i, stage in enumerate(node.parts):
                if i:
                    out.append(Node("operator", stage.pos, text="|"))
                out.extend(_flatten([stage]))
        else:
            out.append(node)
    return out


def _assemble(items: list[Node], pos: tuple[int, int]) -> Node:
    """Statements and operators in a row as a list of pipelines (pipes bind tightest)."""
    parts: list[Node] = []
    stages: list[Node] = []

    def close() -> None:
        if len(stages) == 1:
            parts.append(stages[0])
        elif stages:
            parts.append(Node("pipeline", (stages[0].pos[0], stages[-1].pos[1]), tuple(stages)))
        stages.clear()

    piped = False
    for item in items:
        if item.kind == "operator" and item.text in ("|", "|&"):
            piped = True
            continue
        if item.kind == "operator":
            close()
            parts.append(item)
        else:
            if not piped:
                close()
            stages.append(item)
        piped = False
    close()
    return Node("list", pos, tuple(parts))
