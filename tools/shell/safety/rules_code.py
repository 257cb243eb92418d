"""Heuristics, not parsers, for code in arguments (`python -c`, awk, sed `e`): string
literals handed to a command runner are judged as shell code, and code that picks what it
calls by a computed name (getattr, eval, x['ex' + 'ec']) is asked for."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tools.shell.safety.argv import parse_flags
from tools.shell.safety.context import Context, Rule
from tools.shell.safety.exfil import secret_at
from tools.shell.safety.model import Command, Hit, Word
from tools.shell.safety.names import interpreter_family, is_interpreter
from tools.shell.safety.paths import protected
from tools.shell.safety.sql import dangerous_sql

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
    r"\b(system|exec(?!ute)\w*|popen\w*|spawn\w*|subprocess|check_output|check_call|"
    r"Popen|shell_exec|passthru|proc_open|IO\.popen|Open3|child_process|qx|"
    r"getline|Command)\b|`|\|\s*\"|%x"
)
_DELETES = re.compile(
    r"rmtree|rm_rf|rm_r\b|remove_tree|rmSync|rmdirSync|remove_dir_all|"
    r"FileUtils\.rm|fs\.rm|Remove-Item|unlink|os\.remove|rmdir"
)
_ARRAY = re.compile(r"\[([^\[\]]*)\]")
_SQL_CALL = re.compile(r"\b(execute|executemany|executescript|exec|query|raw|run)\s*\(", re.I)
_WRITES = re.compile(
    r"\bopen\s*\([^)]*['\"][wax+]|write_text|write_bytes|writeFile|appendFile|truncate|"
    r"unlink|remove|rmtree|rename|replace|copy|move|symlink|chmod|File\.(write|open)|>>?"
)
# Ways to call something whose name is computed: getattr(os, 'sys' + 'tem'), x['ex' + 'ec'](..),
# eval, __import__ of a non-literal, reflection. Searched with string contents removed.
_DYNAMIC = re.compile(
    r"(?<![.\w])(getattr|setattr|globals|locals|vars|eval|compile|loadstring)\s*\(|"
    r"\b(__getattribute__|__dict__|__builtins__|__globals__|__subclasses__|__code__|"
    r"attrgetter|methodcaller|importlib|import_module|ctypes|cffi|"
    r"Reflect|fromCharCode|atob|instance_eval|class_eval|module_eval|const_get|"
    r"public_send|__send__|call_user_func(_array)?|create_function)\b\s*[(.\[]?|"
    r"\b(__import__|require|import)\s*\(\s*(?!(''|\"\")\s*\))|"
    r"\bnew\s+Function\b|\bFunction\s*\(|"
    r"\bprocess\s*\.\s*(binding|dlopen)|\b(globalThis|global|window|_G|_ENV)\s*\[|"
    r"\bsys\.modules\b|\[(?!\s*-?\d+\s*\])[^\[\]\n]*\]\s*\("
)
_DYNAMIC_BY_FAMILY: dict[str, re.Pattern[str]] = {
    "ruby": re.compile(r"\.\s*(send|method|instance_variable_get)\b|\beval\b"),
    "perl": re.compile(r"&\s*[{$]|\*\s*\{|->\s*can\b|\beval\s*(?!\{)|\bdo\s*[$'\"]"),
    "php": re.compile(r"\$\w+\s*\(|\$\{|\bassert\s*\("),
    "lua": re.compile(r"\bload\s*\(|\bdebug\."),
}
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
    """Judge inline code by the shell commands and paths it hands to the system.

    Keywords are looked for outside string literals (`print('rmtree')` deletes nothing);
    the literals themselves are judged as the commands, paths and SQL they may be.
    """
    masked = _LITERAL.sub(_emptied, code)
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
    if dynamic := _dynamic_access(masked, family):
        yield Hit(
            "ask",
            f"{family} code looks up what it calls at run time ({dynamic}), "
            "which can hide what it runs",
            downgradable=False,
        )
    if _RUNS.search(masked):
        # Code that starts programs may build their command lines in ways not followed here.
        yield Hit("ask", f"{family} code runs other programs")
        for literal in literals:
            for finding in ctx.analyze(literal):
                yield Hit(finding.action, f"{family} code runs a shell command: {finding.reason}")
    if _DELETES.search(masked):
        for literal in literals:
            if "/" not in literal and not literal.startswith("~"):
                continue
            whys = (protected(p.path) for p in ctx.scope.locate(Word.literal(literal)))
            why = next((w for w in whys if w), None)
            if why:
                yield Hit("block", f"{family} code deletes {why}")
        yield Hit("ask", f"{family} code deletes files")
    if re.search(r"\bfork\b", masked) and re.search(r"\b(while|for|loop|until|each)\b", masked):
        yield Hit("ask", f"{family} code forks in a loop (possible fork bomb)")
    if re.search(r"\bkill\s*\(\s*-1\b", masked):
        yield Hit("block", f"{family} code signals every process (kill -1)")
    if _SQL_CALL.search(masked):
        for literal in literals:
            if reason := dangerous_sql(literal):
                yield Hit("ask", f"{family} code sends SQL that {reason[0]}")
                break
    yield from _paths_in_code(literals, family, ctx, writes=bool(_WRITES.search(masked)))


def _emptied(m: re.Match[str]) -> str:
    """A literal with its content removed, quotes kept (`'rm'` -> `''`)."""
    text = m.group(0)
    if text.startswith("`"):
        return text  # backticks run commands in ruby, perl and php: keep them visible
    quote = text[:3] if text[:3] in ("'''", '"""') else text[0]
    return quote + quote


def _dynamic_access(masked: str, family: str) -> str | None:
    """The construct by which code picks a function by a computed name, if any."""
    m = _DYNAMIC.search(masked) or (
        _DYNAMIC_BY_FAMILY[family].search(masked) if family in _DYNAMIC_BY_FAMILY else None
    )
    return " ".join(m.group(0).rstrip("([. ").split())[:40] if m else None


def _paths_in_code(
    literals: list[str], family: str, ctx: Context, *, writes: bool
) -> Iterator[Hit]:
    """String literals naming the gateway's own files or secrets outside the workspace."""
    for literal in literals:
        if not re.fullmatch(r"[\w./~@%+,:-]+", literal) or "/" not in literal + "~":
            continue
        for place in ctx.scope.locate(Word.literal(literal)):
            guarded = ctx.state.owner(place.path)
            secret = secret_at(place.path, ctx, place.outside)
            if guarded is not None and (writes or guarded.secret):
                yield Hit("ask", f"{family} code touches {literal} ({guarded.label})")
                return
            if secret is not None and secret.exposed_by_reading:
                yield Hit("ask", f"{family} code reads {secret.label}")
                return


def sed(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """GNU sed's `e` command and `s///e` flag run shell commands."""
    flags = parse_flags(cmd.words[1:], "eflsE", ("--expression", "--file", "--line-length"))
    scripts = flags.value("-e", "--expression") or [w.text for w in flags.operands[:1]]
    for script in scripts:
        if re.search(r"(^|[;\n{}])\s*(\d+|\$|/[^/]*/)?\s*e(\s|$)", script) or re.search(
            r"(^|[;\n])\s*\S*s(.)(?:(?!\2).)*\2(?:(?!\2).)*\2[gpiImM0-9w]*e", script
        ):
            yield Hit("ask", "the sed script runs shell commands (e)")


RULES: dict[str, Rule] = {
    **dict.fromkeys(("awk", "gawk", "mawk", "nawk"), inline_code),
    "sed": sed,
}
INTERPRETER_RULES: list[Rule] = [inline_code]
