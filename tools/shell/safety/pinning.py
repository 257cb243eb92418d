"""What makes a command's shape unable to name what will really run: anything in the same
text that may change the working directory or what a command name means before it runs.
Such commands are asked for each time; no standing approval covers them."""

from __future__ import annotations

from tools.shell.safety.syntax import Node, descendants
from tools.shell.safety.words import WordExpander

# Builtins that run code the shape does not show (eval, source, trap), change directory in
# ways not followed (builtin cd, command cd, popd), or redefine names (alias, hash, enable).
CONTEXT_COMMANDS = frozenset(
    {
        "eval",
        "source",
        ".",
        "builtin",
        "command",
        "trap",
        "alias",
        "unalias",
        "enable",
        "hash",
        "popd",
        "shopt",
    }
)
# Variables that decide where a path or a command name leads.
CONTEXT_VARIABLES = frozenset(
    {
        "PATH",
        "CDPATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "BASH_ENV",
        "ENV",
        "BASH_CMDS",
        "BASH_ALIASES",
        "GLOBIGNORE",
        "BASHOPTS",
        "SHELLOPTS",
        "IFS",
    }
)

# Commands whose arguments may assign variables (export PATH=..., env HOME=... cmd).
_SETTERS = frozenset({"export", "declare", "typeset", "local", "readonly", "env"})


def context_change(trees: list[Node], expander: WordExpander) -> str:
    """Why the commands of `trees` may not run where and as they read ("" if nothing)."""
    for tree in trees:
        for node in descendants(tree):
            if node.kind == "function":
                return "it defines a function, which may replace a command"
            if node.kind == "assignment" and _variable(node.text) in CONTEXT_VARIABLES:
                return f"it sets {_variable(node.text)}"
            if node.kind != "command":
                continue
            words = [p for p in node.parts if p.kind == "word"]
            name = expander.single(words[0]).text if words else ""
            if name in CONTEXT_COMMANDS:
                return f"it runs {name}"
            if name not in _SETTERS:
                continue
            for word in words[1:]:
                text = expander.single(word).text if "=" in word.text else ""
                if "=" in text and _variable(text) in CONTEXT_VARIABLES:
                    return f"it sets {_variable(text)}"
    return ""


def _variable(assignment: str) -> str:
    return assignment.split("=", 1)[0].rstrip("+").split("[", 1)[0]
