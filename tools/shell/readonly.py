"""Which shell commands only read: after outside content entered a turn, every other command
waits for a person (approvals/untrusted.py). Deliberately short and strict: plain pipelines and
lists of a few well-known programs, literal words (no `$VAR`, no `$(...)`), no assignments,
no loops or functions, output redirected nowhere but /dev/null, and only options each program
is known to have and that neither write files nor run programs (`find -delete`, `sort -o`,
`sort --compress=sh`, `rg --pre` are refused; tools/shell/options.py parses them as GNU does).
Anything else, including git (a repository's config can run commands), is not read-only."""

from __future__ import annotations

import shlex

from tools.shell import options as _options
from tools.shell.safety.syntax import Node, ParseFailure, descendants, parse

# Programs that read files or print facts and never write, send or run anything else, with
# the options they have (tools/shell/options.py); their options that write or run refuse.
READ_ONLY = _options.READ_ONLY | _options.FREE
_QUIET = "/dev/null"


def read_only(command: str) -> bool:
    """True only when every part of `command` is known to just read."""
    try:
        trees = parse(command)
    except ParseFailure:
        return False
    return bool(trees) and all(_reads(tree) for tree in trees)


def _reads(node: Node) -> bool:
    kind = node.kind
    if kind in ("list", "pipeline"):
        return all(_reads(part) for part in node.parts)
    if kind == "operator":
        return True
    if kind == "test":  # [ -f x ], [[ a == b ]]: only literal words inside
        return all(
            n.kind in ("test", "group", "operator") or (n.kind == "word" and not n.parts)
            for n in descendants(node)
        )
    if kind != "command" or not _command_reads(node):
        return False  # assignments, loops, functions, subshells ...
    for part in node.parts:
        if any(n.kind == "word" and n.parts for n in descendants(part)):
            return False  # $VAR, $(...), <(...): only known when it runs
        if part.kind == "redirect" and not _harmless_redirect(part):
            return False
        if part.kind not in ("word", "redirect"):
            return False
    return True


def _unquoted(text: str) -> str | None:
    """The word without its quotes; None for anything but plain quoting ($'..', quotes that
    do not close), which is not judged here."""
    if "$" in text:
        return None
    try:
        split = shlex.split(text)
    except ValueError:
        return None
    return split[0] if len(split) == 1 else None


def _expands(text: str) -> bool:
    """An unquoted glob or brace: bash may turn it into other words, file names included
    (a downloaded file named `-ofoo` makes `sort *` write foo)."""
    quote = ""
    escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "*?[{":
            return True
    return False


def _command_reads(node: Node) -> bool:
    raw = [part.text for part in node.parts if part.kind == "word"]
    words = [_unquoted(text) for text in raw]
    if not words or None in words:
        return False
    name = words[0]
    if not name or "/" in name or name not in READ_ONLY:
        return False
    if name in _options.OPTION_SENSITIVE and any(_expands(text) for text in raw[1:]):
        return False
    return _options.reads_only(name, [w for w in words[1:] if w is not None])


def _harmless_redirect(node: Node) -> bool:
    op = node.text
    target = _unquoted(node.target.text) if node.target is not None else None
    if node.heredoc is not None:
        return False
    if op == "<<<":
        return True
    if op == "<":
        # bash opens a network connection for these names itself.
        return target is not None and not target.startswith(("/dev/tcp/", "/dev/udp/"))
    if op in (">&", "<&") and target is None:
        return True  # 2>&1
    return op in (">", ">>", "&>", ">&") and target == _QUIET


# Programs that only remove files: what a workspace at its quota may still run.
_REMOVERS = frozenset({"rm", "rmdir", "unlink"})


def frees_space(command: str) -> bool:
    """True when every part of `command` just reads or removes files (`rm -rf build`):
    literal words only, no redirect but to /dev/null."""
    try:
        trees = parse(command)
    except ParseFailure:
        return False
    return bool(trees) and all(_reads_or_removes(tree) for tree in trees)


def _reads_or_removes(node: Node) -> bool:
    if node.kind in ("list", "pipeline"):
        return all(_reads_or_removes(part) for part in node.parts)
    if node.kind != "command":
        return _reads(node)
    words = [_unquoted(part.text) for part in node.parts if part.kind == "word"]
    if not words or words[0] not in _REMOVERS:
        return _reads(node)
    for part in node.parts:
        if any(n.kind == "word" and n.parts for n in descendants(part)):
            return False  # $VAR, $(...): only known when it runs
        if part.kind == "redirect" and not _harmless_redirect(part):
            return False
        if part.kind not in ("word", "redirect"):
            return False
    return None not in words
