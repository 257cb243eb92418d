"""Which rules look at a command, and the shape under which similar commands are approved."""

from __future__ import annotations

from tools.shellsafety import rules_code, rules_data, rules_fs, rules_sys
from tools.shellsafety.context import Rule
from tools.shellsafety.model import Command, Word
from tools.shellsafety.names import SHELLS, is_interpreter
from tools.shellsafety.paths import Scope
from tools.shellsafety.unwrap import WRAPPER_NAMES

_BY_NAME: dict[str, list[Rule]] = {}
for _table in (rules_fs.RULES, rules_sys.RULES, rules_data.RULES, rules_code.RULES):
    for _name, _rule in _table.items():
        _BY_NAME.setdefault(_name, []).append(_rule)
_GENERIC: list[Rule] = [*rules_fs.GENERIC, *rules_data.GENERIC]
_INTERPRETER: list[Rule] = [*rules_code.INTERPRETER_RULES, *rules_sys.INTERPRETER_RULES]
# Tools whose first operand is a subcommand that belongs in the shape (git push, docker rm).
_SUBCOMMAND_TOOLS = frozenset(
    {
        "git",
        "docker",
        "podman",
        "nerdctl",
        "systemctl",
        "service",
        "apt",
        "apt-get",
        "aptitude",
        "yum",
        "dnf",
        "zypper",
        "apk",
        "brew",
        "pip",
        "pip3",
        "npm",
        "pnpm",
        "yarn",
        "snap",
        "flatpak",
        "gem",
        "cargo",
        "conda",
        "kubectl",
        "helm",
        "crontab",
        "ufw",
        "nft",
        "loginctl",
    }
)
_VALUE_OPTIONS = frozenset({"-C", "-c", "-H", "--host", "--context", "-n", "--namespace"})
# Tools whose single-dash options are whole words (find -delete), not letter clusters.
_WORD_OPTIONS = frozenset({"find", "openssl", "java", "go", "ffmpeg", "sqlite3", "tar", "kill"})


def known_names() -> frozenset[str]:
    """Command names worth trying when a name is a glob (/???/r? could be rm)."""
    return _KNOWN


_KNOWN = frozenset({*_BY_NAME, *WRAPPER_NAMES, *SHELLS, "mkfs", "mkfs.ext4", "dd", "eval"})


def rules_for(name: str) -> list[Rule]:
    rules = list(_BY_NAME.get(name, ()))
    rules += [rule for prefix, rule in rules_fs.PREFIX_RULES.items() if name.startswith(prefix)]
    if is_interpreter(name):
        rules += _INTERPRETER
    return rules + _GENERIC


def shape_of(cmd: Command, scope: Scope | None = None) -> str:
    """`rm -f -r <args>`, `git push --force <args>`: name, subcommand, sorted flags.

    Operands become <args>, or <outside> (outside the workspace) and <dynamic> (known only
    at run time), so approving `rm -rf build` does not pre-approve `rm -rf ~/src`.
    """
    if not cmd.words:
        return "(redirection)"
    head = [cmd.name]
    flags: set[str] = set()
    operands: set[str] = set()
    want_sub = cmd.name in _SUBCOMMAND_TOOLS
    skip = False
    for word in cmd.words[1:]:
        text = word.text
        if skip:
            skip = False
        elif text.startswith("--"):
            flags.add(text.split("=", 1)[0])
        elif text.startswith("-") and len(text) > 1:
            if want_sub and text in _VALUE_OPTIONS:
                skip = True
            elif text[1:].isalpha() and cmd.name not in _WORD_OPTIONS:
                flags.update("-" + ch for ch in text[1:])
            else:
                flags.add(text)
        elif want_sub:
            head.append(text)
            want_sub = False
        else:
            operands.add(_operand_kind(word, scope))
    return " ".join([*head, *sorted(flags), *sorted(operands)])


def _operand_kind(word: Word, scope: Scope | None) -> str:
    if word.dynamic:
        return "<dynamic>"
    if scope is not None and any(p.outside for p in scope.locate(word)):
        return "<outside>"
    return "<args>"
