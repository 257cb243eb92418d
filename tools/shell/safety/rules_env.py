"""Environment variables that make ordinary programs run other code: GIT_SSH_COMMAND,
PAGER and EDITOR name commands (judged like any command), LD_PRELOAD and BASH_ENV load code
(always asked for)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tools.shell.safety.context import Context, Rule, shown
from tools.shell.safety.model import SEVERITY, Command, Hit, Word

# The value is a command line some program will run.
COMMAND_HOOKS = frozenset(
    {
        "GIT_SSH_COMMAND",
        "GIT_SSH",
        "GIT_EDITOR",
        "GIT_SEQUENCE_EDITOR",
        "GIT_PAGER",
        "GIT_ASKPASS",
        "GIT_EXTERNAL_DIFF",
        "GIT_PROXY_COMMAND",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "MANPAGER",
        "SYSTEMD_PAGER",
        "SYSTEMD_EDITOR",
        "PSQL_PAGER",
        "PSQL_EDITOR",
        "MYSQL_PAGER",
        "LESSOPEN",
        "LESSCLOSE",
        "BROWSER",
        "FCEDIT",
        "PROMPT_COMMAND",
        "RSYNC_RSH",
        "RSYNC_CONNECT_PROG",
        "CVS_RSH",
        "SVN_SSH",
        "SVN_EDITOR",
        "HGEDITOR",
        "KUBECTL_EXTERNAL_DIFF",
        "KUBE_EDITOR",
        "npm_config_script_shell",
    }
)
# The value makes a program load code (a library, a start-up script, interpreter options).
LOADER_HOOKS = frozenset(
    {
        "BASH_ENV",
        "ENV",
        "LD_PRELOAD",
        "LD_AUDIT",
        "DYLD_INSERT_LIBRARIES",
        "GCONV_PATH",
        "PERL5DB",
        "PYTHONSTARTUP",
        "GIT_EXEC_PATH",
        "GIT_TEMPLATE_DIR",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG",
        "GIT_CONFIG_PARAMETERS",
        "GIT_CONFIG_COUNT",
        "SHELLOPTS",
        "BASHOPTS",
    }
)
_LOADER_PATTERN = re.compile(r"BASH_FUNC_.*|GIT_CONFIG_(KEY|VALUE)_\d+")
# Interpreter options in the environment: only the ones that load code count
# (NODE_OPTIONS=--max-old-space-size=4096 is everyday use).
_OPTION_HOOKS: dict[str, re.Pattern[str]] = {
    "NODE_OPTIONS": re.compile(r"(^|\s)(-r|--require|--import|--loader|--experimental-loader)\b"),
    "RUBYOPT": re.compile(r"(^|\s)-r"),
    "PERL5OPT": re.compile(r"(^|\s)-[MmId]"),
    **dict.fromkeys(
        ("JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS"),
        re.compile(r"-javaagent|-agentpath|-agentlib|OnError|OnOutOfMemoryError"),
    ),
}
_SETTERS = frozenset({"export", "declare", "typeset", "local", "readonly", "env", "sudo"})


def hook_hits(name: str, value: Word, ctx: Context) -> Iterator[Hit]:
    """What setting `name=value` lets happen later in this command line."""
    if name in COMMAND_HOOKS:
        if value.dynamic:
            yield Hit(
                "ask",
                f"{name} is set to a command only known at run time ({shown([value.text], 60)})",
                downgradable=False,
            )
            return
        worst: Hit | None = None
        for finding in ctx.analyze(value.text) if value.text.strip() else []:
            if worst is None or SEVERITY[finding.action] > SEVERITY[worst.action]:
                worst = Hit(finding.action, f"{name} runs a command: {finding.reason}")
        if worst is not None:
            yield worst
    elif (
        name in LOADER_HOOKS
        or _LOADER_PATTERN.fullmatch(name)
        or (name in _OPTION_HOOKS and (value.dynamic or _OPTION_HOOKS[name].search(value.text)))
    ):
        shown_value = shown([value.text], 60)
        yield Hit("ask", f"{name}={shown_value} makes programs load code they would not load")


def setters(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """export X=.., declare -x X=.., env X=.. cmd, sudo X=.. cmd."""
    for word in cmd.words[1:]:
        name, eq, value = word.text.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            yield from hook_hits(
                name, Word(text=value, pattern=value, dynamic=word.dynamic, raw=word.raw), ctx
            )


RULES: dict[str, Rule] = dict.fromkeys(_SETTERS, setters)
