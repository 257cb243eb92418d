"""Programs that run shell commands handed to them in options or in their own command
language: tar --to-command, vim -c '!..', psql '\\!', sqlite3 .shell, gdb shell, man -P,
zip -TT, git -c core.sshCommand and the like. What they would run is judged as shell code."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from tools.shell.safety.context import Context, Rule, shown
from tools.shell.safety.model import SEVERITY, Command, Hit

_GIT_RUNS = re.compile(
    r"(?i)(alias\.[\w.-]+=!|core\.(sshcommand|pager|editor|fsmonitor|hookspath|askpass|"
    r"gitproxy)=|(diff|merge|filter)\.[\w.-]+\.(command|textconv|driver|clean|smudge|process)=|"
    r"(diff|merge)tool\.[\w.-]+\.cmd=|diff\.external=|uploadpack\.packobjectshook=|"
    r"pager\.[\w.-]+=|init\.templatedir=|include(if\.[^=]*)?\.path=|"
    r"credential\.helper=!|sequence\.editor=|gpg\.program=|ssh\.variant=|protocol\.ext\.allow=)"
)
# Pagers and editors that only show or edit text (git -c core.pager=cat log).
_HARMLESS_PROGRAM = re.compile(
    r"(cat|less|more|true|false|vi|vim|nvim|nano|emacs)(\s+-[A-Za-z+]+)*"
)
# Returns the command strings a program would hand to a shell; "" stands for "something
# runs, but what is not known" (sqlite3 .load, vim :python).
Extractor = Callable[[Command, list[str]], Iterator[str]]
# Escapes found by text heuristics inside another language (SQL clients, debuggers, expect)
# are at least `ask` whatever they run: the extraction may miss part of the command.
_ALWAYS_ASK = frozenset(
    {
        "psql",
        "mysql",
        "mariadb",
        "sqlite3",
        "sqlite",
        "duckdb",
        "spatialite",
        "gdb",
        "lldb",
        "expect",
        "ed",
        "red",
        "dc",
        "zip",
        "tcpdump",
        "apt",
        "apt-get",
        "rpm",
        "aria2c",
        "wget",
        "wget2",
    }
)
_ASK_MARK = "\x00ask:"  # prefix an extractor puts on a command that must be asked for


def escapes(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Judge each command a program would run (and ask for the ones found by heuristics)."""
    extract = _EXTRACTORS.get(cmd.name)
    if extract is None:
        return
    for found in dict.fromkeys(extract(cmd, list(cmd.args))):
        always = cmd.name in _ALWAYS_ASK or found.startswith(_ASK_MARK)
        command = found.removeprefix(_ASK_MARK)
        worst: Hit | None = None
        for finding in ctx.analyze(command) if command.strip() else []:
            if worst is None or SEVERITY[finding.action] > SEVERITY[worst.action]:
                worst = Hit(finding.action, f"{cmd.name} runs a command: {finding.reason}")
        if worst is not None:
            yield worst
        if not command.strip():
            yield Hit("ask", f"{cmd.name} runs code that is not checked here")
        elif always:
            yield Hit("ask", f"{cmd.name} runs a shell command ({shown([command], 60)})")


def _values(args: list[str], *names: str) -> Iterator[str]:
    """Values of options `-x v`, `-xv` (one letter), `--name v` and `--name=v`."""
    for i, arg in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        for name in names:
            if arg == name:
                yield nxt
            elif name.startswith("--") and arg.startswith(name + "="):
                yield arg[len(name) + 1 :]
            elif len(name) == 2 and arg.startswith(name) and len(arg) > 2 and name != "-e":
                yield arg[2:]


def _tar(cmd: Command, args: list[str]) -> Iterator[str]:
    for value in _values(args, "--use-compress-program", "-I"):
        yield value  # a compressor (-I zstd) is judged like any command
    for value in _values(
        args,
        "--to-command",
        "--checkpoint-action",
        "--rsh-command",
        "--info-script",
        "--new-volume-script",
        "-F",
    ):
        yield _ASK_MARK + value.removeprefix("exec=")


def _rsync(cmd: Command, args: list[str]) -> Iterator[str]:
    yield from _values(args, "-e", "--rsh")


_VIM_CODE = re.compile(
    r"\b(system|systemlist|job_start|jobstart|termopen|libcall|libcallnr)\s*\(|"
    r"^\s*:*\s*(silent!?\s+)?(py|python|py3|python3|pyx|pythonx|pyfile|py3file|lua|luafile|"
    r"perl|ruby|rubyfile|tcl|mzscheme|term|terminal|sh|shell|exe|execute|so|source)\b",
    re.M,
)
_LITERAL = re.compile(r"'([^'\n]*)'|\"((?:[^\"\\\n]|\\.)*)\"")


def _vim(cmd: Command, args: list[str]) -> Iterator[str]:
    texts = list(_values(args, "-c", "--cmd"))
    texts += [a[1:] for a in args if a.startswith("+") and len(a) > 1]
    silent = any(a.startswith(("-e", "-s")) for a in args) or cmd.name == "ex"
    if silent and cmd.stdin.text:
        texts += cmd.stdin.text.splitlines()
    for text in texts:
        yield from _ex_commands(text)


def _ex_commands(text: str) -> Iterator[str]:
    """Shell commands in ex commands: `!cmd`, `r !cmd`, `%!cmd`, system('cmd') ..."""
    for line in re.split(r"\n|(?<!\\)\|", text):
        body = line.strip().lstrip(":").strip()
        bang = re.match(r"(silent!?\s+)?([%.$,\d'<>\s]*|r(ead)?\s*|w(rite)?\s*)!(.*)", body)
        if bang:
            yield bang.group(5)
        elif _VIM_CODE.search(body):
            literals = [a or b for a, b in _LITERAL.findall(body)]
            yield from [_ASK_MARK + lit for lit in literals] or [""]


def _ssh(cmd: Command, args: list[str]) -> Iterator[str]:
    """-o ProxyCommand=cmd, -o 'LocalCommand cmd', -o KnownHostsCommand cmd."""
    for i, arg in enumerate(args):
        m = re.match(r"(?i)(proxy|local|knownhosts)command(\s*=\s*|\s+)?(.*)", arg, re.S)
        if m:
            yield m.group(3) if m.group(2) else (args[i + 1] if i + 1 < len(args) else "")


def _git_program(setting: str) -> Iterator[str]:
    """What a `key=value` setting makes git run later, marked to be asked for unless it is a
    plain pager or editor (core.pager=cat)."""
    if not _GIT_RUNS.match(setting):
        return
    value = setting.split("=", 1)[1].lstrip("!")
    if _HARMLESS_PROGRAM.fullmatch(value.strip()):
        yield value
    elif setting.lower().startswith("core.hookspath="):
        yield f"{_ASK_MARK}hooks in {value}"
    else:
        yield _ASK_MARK + value


def _git(cmd: Command, args: list[str]) -> Iterator[str]:
    for i, arg in enumerate(args):
        nxt = args[i + 1] if i + 1 < len(args) else ""
        if arg in ("-c", "--config"):
            yield from _git_program(nxt)
        elif arg.startswith("--config="):
            yield from _git_program(arg[9:])
        elif arg.startswith("--config-env"):
            yield _ASK_MARK + "a program named by an environment variable"
        elif arg == "config":
            # git config alias.x '!cmd' (or core.pager ...): runs on a later git call
            words = [a for a in args[i + 1 :] if not a.startswith("-")]
            if words[:1] in (["set"], ["add"]):
                words = words[1:]
            if len(words) >= 2 and not {"--get", "--get-all", "--list", "-l", "get"} & set(args):
                yield from _git_program(f"{words[0]}={words[1]}")
            break
        elif arg.startswith("ext::"):
            yield _ASK_MARK + arg[5:].replace("% ", " ")
    ops = _git_operands(args)
    hooks = ["--upload-pack", "--receive-pack"]
    hooks += ["-u"] if ops[:1] == ["clone"] else []
    hooks += ["--exec"] if ops[:1] and ops[0] in ("push", "fetch", "pull", "ls-remote") else []
    for value in _values(args, *hooks):
        yield _ASK_MARK + value
    yield from _values(args, "--extcmd")
    if ops[:2] == ["submodule", "foreach"] and len(ops) > 2:
        yield " ".join(ops[2:])
    if ops[:1] == ["rebase"]:
        yield from _values(args, "-x", "--exec")
    if ops[:2] == ["bisect", "run"]:
        yield " ".join(_quote(a) for a in args[args.index("run") + 1 :])
    if ops[:1] == ["difftool"]:
        yield from _values(args, "-x")


def _git_operands(args: list[str]) -> list[str]:
    """The subcommand and its operands, global options and their values left out."""
    ops: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") and not ops:
            skip = True
        elif not arg.startswith("-"):
            ops.append(arg)
    return ops


def _psql(cmd: Command, args: list[str]) -> Iterator[str]:
    for text in [*_values(args, "-c", "--command"), cmd.stdin.text or ""]:
        for m in re.finditer(r"\\!([^\n\\]*)", text):
            yield m.group(1)
        for m in re.finditer(r"\\(o|out|g|gx|w|write)\s*\|\s*([^\n\\]*)", text, re.I):
            yield m.group(2)
        for m in re.finditer(r"\bPROGRAM\s+'((?:[^']|'')*)'", text, re.I):
            yield m.group(1).replace("''", "'")


def _mysql(cmd: Command, args: list[str]) -> Iterator[str]:
    yield from _values(args, "--pager")
    for text in [*_values(args, "-e", "--execute"), cmd.stdin.text or ""]:
        for m in re.finditer(r"(?:^|[;\n])\s*(?:system|\\!|pager|\\P)\s+([^;\n]*)", text, re.I):
            yield m.group(1)


def _sqlite(cmd: Command, args: list[str]) -> Iterator[str]:
    texts = [a for a in args if not a.startswith("-")][1:]
    texts += [*_values(args, "-cmd", "--cmd"), cmd.stdin.text or ""]
    for text in texts:
        for line in re.split(r"[\n;]", text):
            line = line.strip()
            m = re.match(r"\.(shell|system)\s+(.*)", line)
            pipe = re.match(r"\.(once|output|import|read)\s+(?:-\w+\s+)*['\"]?\|([^'\"]*)", line)
            if m:
                yield m.group(2)
            elif pipe:
                yield pipe.group(2)
            elif re.match(r"\.load\b", line):
                yield ""  # a native extension runs with the process's rights


_GDB_CODE = re.compile(r"(python|py|pi|python-interactive|guile|gu|script|call|print)\b")


def _gdb(cmd: Command, args: list[str]) -> Iterator[str]:
    texts = list(_values(args, "-ex", "--eval-command", "-iex", "--init-eval-command"))
    texts += list(_values(args, "-o", "--one-line", "-O", "--source-before-file", "-k"))
    for text in texts:
        body = text.strip()
        m = re.match(r"(?:shell|!|platform\s+shell)\s*(.*)", body, re.S)
        pipe = re.match(r"(?:pipe|\|)\s*.*?\|\s*(.*)", body, re.S)
        if m:
            yield m.group(1)
        elif pipe:
            yield pipe.group(1)
        elif re.match(_GDB_CODE, body) and re.search(r"system|popen|exec|spawn|subprocess", body):
            yield from [_ASK_MARK + (a or b) for a, b in _LITERAL.findall(body)] or [""]


def _expect(cmd: Command, args: list[str]) -> Iterator[str]:
    texts = [*_values(args, "-c"), cmd.stdin.text or ""]
    for text in texts:
        for m in re.finditer(r"(?:^|[;\n\[{])\s*(spawn|exec|system)\s+([^;\n\]}]*)", text):
            yield re.sub(r"^(-\w+\s+)*", "", m.group(2))


def _man(cmd: Command, args: list[str]) -> Iterator[str]:
    yield from _values(args, "-P", "--pager", "-H", "--html")


def _zip(cmd: Command, args: list[str]) -> Iterator[str]:
    yield from _values(args, "-TT", "--unzip-command")


def _apt(cmd: Command, args: list[str]) -> Iterator[str]:
    for value in _values(args, "-o", "--option"):
        if re.search(r"(Pre|Post)-Invoke|Pre-Install-Pkgs|::Hook", value, re.I):
            yield value.split("=", 1)[-1]


def _sort(cmd: Command, args: list[str]) -> Iterator[str]:
    yield from _values(args, "--compress-program")


def _tcpdump(cmd: Command, args: list[str]) -> Iterator[str]:
    yield from _values(args, "-z")


def _rpm(cmd: Command, args: list[str]) -> Iterator[str]:
    for value in _values(args, "--eval", "-E"):
        yield from re.findall(r"%\(([^)]*)\)", value)
        if "%{lua" in value:
            yield ""


def _less(cmd: Command, args: list[str]) -> Iterator[str]:
    for arg in args:
        if arg.startswith("+") and "!" in arg:
            yield arg.split("!", 1)[1]


def _stdin_bang(cmd: Command, args: list[str]) -> Iterator[str]:
    """ed and dc run `!command` lines of their script (stdin, or dc -e)."""
    texts = [cmd.stdin.text or "", *_values(args, "-e", "--expression")]
    for text in texts:
        yield from re.findall(r"(?:^|\n)\s*[^!\n]{0,8}!([^\n]*)", text)


def _wget(cmd: Command, args: list[str]) -> Iterator[str]:
    yield from _values(args, "--use-askpass")


def _aria2c(cmd: Command, args: list[str]) -> Iterator[str]:
    for arg in args:
        if arg.startswith("--on-") and "=" in arg:
            yield arg.split("=", 1)[1]


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w./=:,@%+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


_EXTRACTORS: dict[str, Extractor] = {
    "tar": _tar,
    "rsync": _rsync,
    **dict.fromkeys(("vim", "vi", "nvim", "view", "vimdiff", "gvim", "ex"), _vim),
    **dict.fromkeys(("ssh", "scp", "sftp"), _ssh),
    "git": _git,
    "psql": _psql,
    **dict.fromkeys(("mysql", "mariadb"), _mysql),
    **dict.fromkeys(("sqlite3", "sqlite", "duckdb", "spatialite"), _sqlite),
    **dict.fromkeys(("gdb", "lldb"), _gdb),
    "expect": _expect,
    "man": _man,
    "zip": _zip,
    **dict.fromkeys(("apt", "apt-get"), _apt),
    "sort": _sort,
    "tcpdump": _tcpdump,
    "rpm": _rpm,
    **dict.fromkeys(("less", "more"), _less),
    **dict.fromkeys(("ed", "dc", "red"), _stdin_bang),
    **dict.fromkeys(("wget", "wget2"), _wget),
    "aria2c": _aria2c,
}
RULES: dict[str, Rule] = dict.fromkeys(_EXTRACTORS, escapes)
