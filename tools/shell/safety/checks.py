"""Which rules look at a command: by its name, by family (interpreters), and for every one."""

from __future__ import annotations

from tools.shell.safety import (
    exfil,
    rules_cloud,
    rules_code,
    rules_data,
    rules_env,
    rules_escape,
    rules_fs,
    rules_reach,
    rules_sys,
)
from tools.shell.safety.context import Rule
from tools.shell.safety.names import INTERPRETERS, PLAIN_PROGRAMS, SHELLS, is_interpreter
from tools.shell.safety.unwrap import WRAPPER_NAMES

_BY_NAME: dict[str, list[Rule]] = {}
for _table in (
    rules_fs.RULES,
    rules_sys.RULES,
    rules_data.RULES,
    rules_code.RULES,
    rules_escape.RULES,
    rules_cloud.RULES,
    rules_env.RULES,
    rules_reach.RULES,
):
    for _name, _rule in _table.items():
        _BY_NAME.setdefault(_name, []).append(_rule)
_GENERIC: list[Rule] = [*rules_fs.GENERIC, *rules_data.GENERIC, *exfil.GENERIC]
_INTERPRETER: list[Rule] = [
    *rules_code.INTERPRETER_RULES,
    *rules_sys.INTERPRETER_RULES,
    *rules_reach.INTERPRETER_RULES,
]
_KNOWN = frozenset({*_BY_NAME, *WRAPPER_NAMES, *SHELLS, "mkfs", "mkfs.ext4", "dd", "eval"})
# Names that start a command worth judging when an unknown program is given them as
# arguments (`frobnicate rm -rf /`): anything with a rule, a wrapper, a shell, an interpreter.
_RUNNABLE = _KNOWN | INTERPRETERS


def known_names() -> frozenset[str]:
    """Command names worth trying when a name is a glob (/???/r? could be rm)."""
    return _KNOWN


def is_known(name: str) -> bool:
    """Judged by its own rules, or known not to run its arguments as a command."""
    return name in _KNOWN or name in PLAIN_PROGRAMS or is_interpreter(name)


def starts_command(name: str) -> bool:
    return name in _RUNNABLE or is_interpreter(name)


def rules_for(name: str) -> list[Rule]:
    rules = list(_BY_NAME.get(name, ()))
    rules += [rule for prefix, rule in rules_fs.PREFIX_RULES.items() if name.startswith(prefix)]
    if is_interpreter(name):
        rules += _INTERPRETER
    return rules + _GENERIC
