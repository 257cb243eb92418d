"""Which shell commands only read: after outside content entered a turn, every other command
waits for a person (gateway/untrusted.py). Deliberately short and strict: plain pipelines and
lists of a few well-known programs, literal words (no `$VAR`, no `$(...)`), no assignments,
no loops or functions, output redirected nowhere but /dev/null, and none of the options with
which those programs write files or run other programs (`find -delete`, `sort -o`, `rg --pre`).
Anything else, including git (a repository's config can run commands), is not read-only."""

from __future__ import annotations

import shlex

from tools.shellsafety.syntax import Node, ParseFailure, descendants, parse

# Programs that read files or print facts and never write, send or run anything else, apart
# from the options refused below.
READ_ONLY = frozenset(
    {
        "basename",
        "cat",
        "cksum",
        "cmp",
        "column",
        "comm",
        "cut",
        "date",
        "df",
        "diff",
        "dirname",
        "du",
        "echo",
        "egrep",
        "expand",
        "false",
        "fgrep",
        "file",
        "find",
        "fold",
        "grep",
        "head",
        "id",
        "jq",
        "ls",
        "md5sum",
        "nl",
        "od",
        "paste",
        "printf",
        "pwd",
        "readlink",
        "realpath",
        "rev",
        "rg",
        "seq",
        "sha1sum",
        "sha256sum",
        "sha512sum",
        "sort",
        "stat",
        "strings",
        "tac",
        "tail",
        "test",
        "tr",
        "tree",
        "true",
        "uname",
        "unexpand",
        "uniq",
        "wc",
        "whoami",
        "[",
    }
)
# Options with which a program above writes a file, changes something or runs a program.
_WRITING_OPTIONS = {
    "find": (
        "-delete",
        "-exec",
        "-execdir",
        "-ok",
        "-okdir",
        "-fprint",
        "-fprint0",
        "-fprintf",
        "-fls",
    ),
    "sort": ("-o", "--output", "--compress-program"),
    "rg": ("--pre",),
    "tree": ("-o",),
    "date": ("-s", "--set"),
    "file": ("-C", "--compile"),
}
_PARENT_KINDS = frozenset({"pipeline", "list", "operator", "command"})
_QUIET = "/dev/null"


def read_only(command: str) -> bool:
    """True only when every part of `command` is known to just read."""
    try:
        trees = parse(command)
    except ParseFailure:
        return False
    for tree in trees:
        for node in descendants(tree):
            kind = node.kind
            if kind == "command" and not _command_reads(node):
                return False
            if kind == "redirect" and not _harmless_redirect(node):
                return False
            if kind == "word" and node.parts:
                return False  # $VAR, $(...), <(...): only known when it runs
            if kind not in _PARENT_KINDS and kind not in ("redirect", "word"):
                return False  # assignments, loops, functions, here-documents ...
    return bool(trees)


def _unquoted(text: str) -> str:
    """The word without its quotes; "" for anything but plain quoting ($'..', globs of
    quotes that do not close), which no check below accepts."""
    if "$" in text:
        return ""
    try:
        split = shlex.split(text)
    except ValueError:
        return ""
    return split[0] if len(split) == 1 else ""


def _command_reads(node: Node) -> bool:
    words = [_unquoted(part.text) for part in node.parts if part.kind == "word"]
    if not words or "" in words[:1] or "/" in words[0] or words[0] not in READ_ONLY:
        return False
    name, args = words[0], words[1:]
    refused = _WRITING_OPTIONS.get(name, ())
    for arg in args:
        if any(arg == opt or arg.startswith(opt + "=") for opt in refused):
            return False
        if name == "sort" and arg.startswith("-") and not arg.startswith("--") and "o" in arg:
            return False  # -o inside a cluster (-uo out.txt)
        if name == "date" and arg.startswith("-") and not arg.startswith("--") and "s" in arg:
            return False
    # `uniq in out` writes its second operand.
    return not (name == "uniq" and len([a for a in args if not a.startswith("-")]) > 1)


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
