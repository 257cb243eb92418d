"""Heuristics, not parsers, for code in arguments (`python -c`, awk, sed `e`, tar
--to-command): string literals handed to a command runner are judged as shell code."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tools.shellsafety.argv import parse_flags
from tools.shellsafety.context import Context, Rule
from tools.shellsafety.model import SEVERITY, Command, Hit, Word
from tools.shellsafety.names import interpreter_family, is_interpreter
from tools.shellsafety.paths import protected

_CODE_FLAGS = {
    "python": "c",
    "pypy": "c",
    "perl": "eE",
    "ruby": "e",
    "node": "ep",
    "nodejs": "ep",
    "php": "r",
    "lua": "e",
    "luajit": "e",
    "bun": "e",
    "pwsh": "c",
    "osascript": "e",
    "Rscript": "e",
    "tclsh": "",
    "deno": "",
    "irb": "",
}
_LITERAL = re.compile(
    r"'''(.*?)'''|\"\"\"(.*?)\"\"\"|'((?:[^'\\\n]|\\.)*)'"
    r"|\"((?:[^\"\\\n]|\\.)*)\"|`([^`]*)`",
    re.S,
)
_RUNS = re.compile(
    r"\b(system|exec\w*|popen\w*|spawn\w*|subprocess|check_output|check_call|"
    r"Popen|shell_exec|passthru|proc_open|IO\.popen|Open3|child_process|qx|"
    r"getline|Command)\b|`|\|\s*\"|%x"
)
_DELETES = re.compile(
    r"rmtree|rm_rf|rm_r\b|remove_tree|rmSync|rmdirSync|remove_dir_all|"
    r"FileUtils\.rm|fs\.rm|Remove-Item|unlink|os\.remove|rmdir"
)
_ARRAY = re.compile(r"\[([^\[\]]*)\]")
_GIT_RUNS = re.compile(
    r"(?i)(alias\.[\w.-]+=!|core\.(sshcommand|pager|editor|fsmonitor|hookspath)=)"
)
MAX_LITERALS = 64  # each literal is parsed as shell code; bound the work


def inline_code(cmd: Command, ctx: Context) -> Iterator[Hit]:
    code = _code_of(cmd)
    if code is None:
        return
    family = interpreter_family(cmd.name) if is_interpreter(cmd.name) else cmd.name
    yield from judge_code(code, family, ctx)


def _code_of(cmd: Command) -> str | None:
    words = list(cmd.words[1:])
    if cmd.name in ("awk", "gawk", "mawk", "nawk"):
        flags = parse_flags(words, "vfFW", ("--assign", "--file", "--field-separator"))
        if flags.value("-f", "--file") or not flags.operands:
            return None
        return flags.operands[0].text
    family = interpreter_family(cmd.name)
    letters = _CODE_FLAGS.get(family)
    if letters is None:
        return None
    for i, word in enumerate(words):
        text = word.text
        if text in ("--eval", "--print", "-Command", "--command") or (
            re.fullmatch(r"-[A-Za-z]*[" + letters + "]", text) if letters else False
        ):
            return words[i + 1].text if i + 1 < len(words) else None
        if family == "deno" and text == "eval" and i + 1 < len(words):
            return words[i + 1].text
    operands = [w.text for w in words if not w.text.startswith("-")]
    if cmd.stdin.text is not None and (not operands or operands[0] == "-"):
        return cmd.stdin.text
    return None


def judge_code(code: str, family: str, ctx: Context) -> Iterator[Hit]:
    """Judge inline code by the shell commands and paths it hands to the system."""
    literals = [next(g for g in m.groups() if g is not None) for m in _LITERAL.finditer(code)]
    literals += [
        " ".join(
            _LITERAL.sub(
                lambda m: next(g for g in m.groups() if g is not None) + " ", inner
            ).split()
        )
        for inner in _ARRAY.findall(code)
        if _LITERAL.search(inner)
    ]
    literals = [lit for lit in literals if lit.strip()][:MAX_LITERALS]
    if _RUNS.search(code):
        # Code that starts programs may build their command lines in ways not followed here.
        yield Hit("ask", f"{family} code runs other programs")
        for literal in literals:
            for finding in ctx.analyze(literal):
                yield Hit(finding.action, f"{family} code runs a shell command: {finding.reason}")
    if _DELETES.search(code):
        for literal in literals:
            if "/" not in literal and not literal.startswith("~"):
                continue
            whys = (protected(p.path) for p in ctx.scope.locate(Word.literal(literal)))
            why = next((w for w in whys if w), None)
            if why:
                yield Hit("block", f"{family} code deletes {why}")
        yield Hit("ask", f"{family} code deletes files")
    if re.search(r"\bfork\b", code) and re.search(r"\b(while|for|loop|until|each)\b", code):
        yield Hit("ask", f"{family} code forks in a loop (possible fork bomb)")
    if re.search(r"\bkill\s*\(\s*-1\b", code):
        yield Hit("block", f"{family} code signals every process (kill -1)")


def sed(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """GNU sed's `e` command and `s///e` flag run shell commands."""
    flags = parse_flags(cmd.words[1:], "eflsE", ("--expression", "--file", "--line-length"))
    scripts = flags.value("-e", "--expression") or [w.text for w in flags.operands[:1]]
    for script in scripts:
        if re.search(r"(^|[;\n{}])\s*(\d+|\$|/[^/]*/)?\s*e(\s|$)", script) or re.search(
            r"(^|[;\n])\s*\S*s(.)(?:(?!\2).)*\2(?:(?!\2).)*\2[gpiImM0-9w]*e", script
        ):
            yield Hit("ask", "the sed script runs shell commands (e)")


def command_options(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Options whose value is a command: tar --to-command, rsync -e, vim -c '!...', ssh -o."""
    for command in _option_commands(cmd):
        worst: Hit | None = None
        for finding in ctx.analyze(command):
            if worst is None or SEVERITY[finding.action] > SEVERITY[worst.action]:
                worst = Hit(finding.action, f"{cmd.name} runs a command: {finding.reason}")
        if worst is not None:
            yield worst
        if cmd.name == "tar":
            yield Hit("ask", f"tar runs a command ({command[:60]})")


def _option_commands(cmd: Command) -> Iterator[str]:
    args = list(cmd.args)
    for i, arg in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        name, eq, value = arg.partition("=")
        if cmd.name == "tar" and name in (
            "--to-command",
            "--checkpoint-action",
            "--rsh-command",
            "--info-script",
            "--new-volume-script",
        ):
            yield value.removeprefix("exec=") if eq else nxt.removeprefix("exec=")
        elif cmd.name == "rsync" and name in ("-e", "--rsh"):
            yield value if eq else nxt
        elif cmd.name in ("vim", "vi", "nvim", "ex", "view") and (
            arg in ("-c", "--cmd") or arg.startswith("+")
        ):
            text = nxt if arg in ("-c", "--cmd") else arg[1:]
            if text.lstrip(":").startswith("!"):
                yield text.lstrip(":")[1:]
        elif cmd.name in ("ssh", "scp", "sftp") and "proxycommand" in arg.lower():
            yield arg.split("=", 1)[-1] if "=" in arg else nxt
        elif cmd.name == "git" and arg == "-c" and _GIT_RUNS.match(nxt):
            yield nxt.split("=", 1)[1].lstrip("!")
        elif cmd.name == "git" and arg == "config" and i + 2 < len(args):
            # git config alias.x '!cmd' (or core.pager ...): runs on a later git call
            key, value = [a for a in args[i + 1 :] if not a.startswith("-")][:2] or ["", ""]
            if _GIT_RUNS.match(f"{key}={value}"):
                yield value.lstrip("!")


RULES: dict[str, Rule] = {
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), inline_code),
    "sed": sed,
    **dict.fromkeys(
        ("tar", "rsync", "vim", "vi", "nvim", "ex", "view", "ssh", "scp", "sftp", "git"),
        command_options,
    ),
}
INTERPRETER_RULES: list[Rule] = [inline_code]
