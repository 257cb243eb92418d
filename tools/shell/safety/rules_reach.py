"""Commands that reach past the workspace or the turn: uploads and pushes to hosts the
command names, servers that publish files, packages fetched and run, config files that make
a program run commands or write files, key deletion in data stores, calls on the system
bus, and signals to the gateway itself."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tools.shell.safety.argv import first_operand, parse_flags
from tools.shell.safety.context import Context, Rule, shown
from tools.shell.safety.exfil import secret_at
from tools.shell.safety.model import Command, Hit, Word

# user@host:path or host:path (not a drive letter, not a URL, not ./a:b)
_REMOTE_PATH = re.compile(r"^(?:[\w.+-]+@)?[\w.-]+:(?!//)")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://|^git@|^[\w.-]+@[\w.-]+:", re.I)


def _remote(text: str) -> bool:
    return bool(_REMOTE_PATH.match(text)) and not text.startswith(("/", "./", "../"))


def copy_to_remote(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """scp/rsync/sftp-style copies whose destination is another host."""
    short = {"scp": "cFiJlOoPS", "rsync": "eBfT"}.get(cmd.name, "")
    flags = parse_flags(
        cmd.words[1:],
        short,
        ("--rsh", "--exclude", "--include", "--filter", "--files-from", "--port", "--chmod"),
    )
    operands = [w.text for w in flags.operands]
    if len(operands) >= 2 and _remote(operands[-1]):
        yield Hit("ask", f"{cmd.name} copies {shown(operands[:-1], 60)} to {operands[-1]}")


def curl_uploads(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """curl sending a file's content, or reading options from a config file (which may set
    any option, output files included)."""
    flags = parse_flags(
        cmd.words[1:],
        "dFTKoHXAueEbcrmwxyzYU",
        (
            "--data",
            "--data-binary",
            "--data-raw",
            "--data-urlencode",
            "--data-ascii",
            "--form",
            "--upload-file",
            "--config",
            "--output",
            "--json",
            "--header",
            "--request",
            "--user",
        ),
    )
    for value in flags.value("-T", "--upload-file"):
        if not _secret(value, ctx):  # a secret has its own, plainer reason (exfil.py)
            yield Hit("ask", f"curl uploads {value}")
        return
    data = flags.value("-d", "--data", "--data-binary", "--data-urlencode", "--data-ascii")
    data += flags.value("--json", "-F", "--form")
    for value in data:
        m = re.search(r"(?:^|=)[@<]([^@<;]+)", value)
        if m and m.group(1) != "-":
            if not _secret(m.group(1), ctx):
                yield Hit("ask", f"curl sends the file {m.group(1)}")
            return
    for value in flags.value("-K", "--config"):
        yield Hit("ask", f"curl reads its options from {value}, which may write files")
        return


def _secret(path: str, ctx: Context) -> bool:
    return any(
        secret_at(place.path, ctx, place.outside) is not None
        for place in ctx.scope.locate(Word.literal(path))
    )


def wget_options(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """wget -e/--execute runs .wgetrc commands (output_document=~/.bashrc ...)."""
    flags = parse_flags(
        cmd.words[1:],
        "eOoaiPB",
        ("--execute", "--config", "--output-document", "--post-file", "--body-file"),
    )
    for value in flags.value("-e", "--execute", "--config"):
        yield Hit("ask", f"wget runs the setting {shown([value], 60)}, which may write files")
        return
    for value in flags.value("--post-file", "--body-file"):
        if not _secret(value, ctx):
            yield Hit("ask", f"wget uploads {value}")
        return


def git_remotes(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """git push to a URL given on the command line, or a remote pointed somewhere new."""
    sub, rest = first_operand(
        cmd.words[1:], "Cc", ("--git-dir", "--work-tree", "--namespace", "--exec-path")
    )
    flags = parse_flags(rest, "o", ("--repo", "--receive-pack", "--exec", "--push-option"))
    ops = [w.text for w in flags.operands]
    if sub == "push":
        where = [*flags.value("--repo"), *ops[:1]]
        if any(_URL.match(w) or _remote(w) or w.startswith(("/", ".")) for w in where):
            yield Hit("ask", f"git push sends commits to {where[0]}")
    elif sub == "remote" and ops[:1] and ops[0] in ("add", "set-url"):
        yield Hit("ask", f"git remote {ops[0]} changes where pushes go ({shown(ops[1:], 60)})")


def serves(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """A web server publishing a directory to whoever can reach the port."""
    texts = [w.text for w in cmd.words[1:]]
    module = texts[texts.index("-m") + 1] if "-m" in texts[:-1] else ""
    if module in ("http.server", "SimpleHTTPServer", "CGIHTTPServer", "uvicorn.main"):
        if not {"-h", "--help"} & set(texts):
            yield Hit("ask", f"serves files over HTTP (python -m {module})")
    elif cmd.name.startswith("php") and any(t == "-S" or t.startswith("-S") for t in texts):
        yield Hit("ask", "serves files over HTTP (php -S)")
    elif cmd.name.startswith("ruby") and any(t in ("-run", "-rtun") for t in texts):
        yield Hit("ask", "serves files over HTTP (ruby -run -e httpd)")


def httpd(cmd: Command, ctx: Context) -> Iterator[Hit]:
    if not {"-h", "--help", "--version"} & set(cmd.args):
        yield Hit("ask", f"{cmd.name} serves files over the network")


_RUNNER_SUBCOMMANDS = {
    "pnpm": ("dlx",),
    "yarn": ("dlx",),
    "npm": ("exec", "x"),
    "pipx": ("run",),
    "uv": ("tool",),
}


def package_runners(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """npx, bunx, uvx, pnpm dlx ...: fetch a package from a registry and run it."""
    texts = [w.text for w in cmd.words[1:]]
    if cmd.name in ("npx", "bunx", "pnpx", "uvx"):
        if texts and not {"-v", "--version", "-h", "--help"} & set(texts):
            yield Hit("ask", f"{cmd.name} fetches and runs {shown(texts, 60)}")
        return
    sub, rest = first_operand(cmd.words[1:], "", ())
    if sub in _RUNNER_SUBCOMMANDS.get(cmd.name, ()):
        if cmd.name == "uv" and not (rest and rest[0].text == "run"):
            return
        yield Hit("ask", f"{cmd.name} {sub} fetches and runs {shown(w.text for w in rest)}")


_REMOTE_SPEC = re.compile(
    r"^(git\+|hg\+|svn\+|bzr\+|https?://|ftp://|file://|github:|gitlab:|bitbucket:|gist:|git://)"
    r"|^[\w.-]+@[\w.-]+:|^[\w-]+/[\w.-]+(#|$)"
)


def installs_from_urls(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Installing from a URL or a repository runs that code's build scripts (pip install
    git+https://..., npm install github:x/y); from a registry by name it is allowed."""
    texts = [w.text for w in cmd.words[1:]]
    name = cmd.name
    if name in ("python", "python3") and texts[:2] == ["-m", "pip"]:
        name, texts = "pip", texts[2:]
    if name in ("uv",) and texts[:1] == ["pip"]:
        name, texts = "pip", texts[1:]
    sub = next((t for t in texts if not t.startswith("-")), "")
    rest = texts[texts.index(sub) + 1 :] if sub else []
    if name in ("pip", "pip3") and sub in ("install", "download", "wheel"):
        specs = [t for t in rest if not t.startswith("-")]
        specs += [t.split("=", 1)[1] for t in rest if t.startswith(("--editable=", "-e="))]
        specs += [rest[i + 1] for i, t in enumerate(rest[:-1]) if t in ("-e", "--editable")]
        specs += [t for t in rest if t.startswith(("--index-url", "--extra-index-url", "-i"))]
        remote = [s for s in specs if (_REMOTE_SPEC.match(s) and "/" in s) or "://" in s]
        if remote:
            yield Hit("ask", f"{name} {sub} runs build code from {shown(remote, 60)}")
    elif name in ("npm", "pnpm", "yarn", "bun") and sub in ("install", "i", "add"):
        remote = [t for t in rest if _REMOTE_SPEC.match(t) and not t.startswith("@")]
        if remote:
            yield Hit("ask", f"{name} {sub} runs install scripts from {shown(remote, 60)}")
    elif name == "go" and sub in ("run", "install"):
        remote = [t for t in rest if "@" in t or re.match(r"[\w-]+\.[\w.-]+/", t)]
        if remote:
            yield Hit("ask", f"go {sub} fetches and builds {shown(remote, 60)}")
    elif (
        name == "cargo"
        and sub == "install"
        and {"--git", "--path"} & {t.split("=", 1)[0] for t in rest}
    ):
        yield Hit("ask", f"cargo install builds code from {shown(rest, 60)}")
    elif name == "gem" and sub == "install" and any(t.startswith("--source") for t in rest):
        yield Hit("ask", "gem install from another source runs its code")


def make_stdin(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """make -f - reads its makefile (recipes are shell code) from standard input."""
    flags = parse_flags(cmd.words[1:], "fCIjloW", ("--file", "--makefile", "--directory"))
    files = flags.value("-f", "--file", "--makefile")
    if any(f in ("-", "/dev/stdin", "/dev/fd/0") or f.startswith("/dev/fd/") for f in files):
        yield Hit("ask", "make reads a makefile, whose recipes are shell commands, from input")


_SQLITE_WRITES = re.compile(r"^\s*\.(output|once|save|backup|clone|excel)\b\s*(.*)", re.M)


def sqlite_files(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """sqlite3 dot-commands that write files anywhere (.output /etc/x, .save x.db)."""
    args = [w.text for w in cmd.words[1:]]
    texts = [a for a in args if not a.startswith("-")][1:]
    texts += [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-cmd", "--cmd")]
    texts.append(cmd.stdin.text or "")
    for text in texts:
        for line in re.split(r"[\n;]", text):
            m = _SQLITE_WRITES.match(line)
            if m and m.group(2).strip() not in ("", "stdout"):
                yield Hit("ask", f"sqlite3 .{m.group(1)} writes {m.group(2).strip()[:60]}")
                return


_REDIS_CHANGES = frozenset(
    {
        "DEL",
        "UNLINK",
        "GETDEL",
        "HDEL",
        "LREM",
        "LTRIM",
        "SREM",
        "ZREM",
        "ZREMRANGEBYSCORE",
        "ZREMRANGEBYRANK",
        "ZREMRANGEBYLEX",
        "XDEL",
        "XTRIM",
        "EXPIRE",
        "PEXPIRE",
        "EXPIREAT",
        "PEXPIREAT",
        "RENAME",
        "RENAMENX",
        "MOVE",
        "MIGRATE",
        "FLUSHALL",
        "FLUSHDB",
        "EVAL",
        "EVALSHA",
        "EVAL_RO",
        "FCALL",
        "FUNCTION",
        "SCRIPT",
        "CONFIG",
        "DEBUG",
        "SHUTDOWN",
        "REPLICAOF",
        "SLAVEOF",
        "CLIENT",
        "ACL",
        "MODULE",
        "SWAPDB",
        "RESTORE",
    }
)


def redis_keys(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """redis-cli commands that delete keys, make them expire, run scripts or reconfigure."""
    args = [w.text for w in cmd.words[1:]]
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag = args[i]
        i += 1
        # -h host, -p port, -a password, -n db, -u uri take a value
        if (len(flag) == 2 and flag[1] in "hpanu") or flag in ("--user", "--pass"):
            i += 1
    words = args[i:]
    if words and words[0].upper() in _REDIS_CHANGES:
        # FLUSHALL/FLUSHDB have their own reason in the SQL checks; this names the rest.
        yield Hit("ask", f"redis-cli {shown(words, 60)} deletes or changes keys")
    elif cmd.stdin.text and any(
        line.split()[:1] and line.split()[0].upper() in _REDIS_CHANGES
        for line in cmd.stdin.text.splitlines()
    ):
        yield Hit("ask", "redis-cli reads commands that delete or change keys")
    elif cmd.stdin.piped and cmd.stdin.text is None and not words:
        yield Hit("ask", "redis-cli runs commands read from its input")


def store_keys(cmd: Command, ctx: Context) -> Iterator[Hit]:
    yield Hit("ask", f"{cmd.name} deletes cached data")


_BUS_READS = {
    "busctl": frozenset({"list", "status", "monitor", "capture", "tree", "introspect", "help"}),
    "gdbus": frozenset({"introspect", "monitor", "help"}),
}


def system_bus(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Method calls on D-Bus reach system services (power off, stop units, log out)."""
    texts = [w.text for w in cmd.words[1:]]
    if cmd.name in _BUS_READS:
        verbs = [t for t in texts if not t.startswith("-")]
        if verbs and verbs[0] not in _BUS_READS[cmd.name]:
            yield Hit("ask", f"{cmd.name} {verbs[0]} calls a system service over D-Bus")
    elif cmd.name == "dbus-send" and texts:
        yield Hit("ask", "dbus-send calls a service over D-Bus")
    elif cmd.name in ("qdbus", "qdbus6") and len([t for t in texts if not t.startswith("-")]) >= 3:
        yield Hit("ask", f"{cmd.name} calls a method over D-Bus")


_UNMODELLED_CODE = {
    "lua": ("-e",),
    "luajit": ("-e",),
    "julia": ("-e", "--eval", "-E", "--print"),
    "deno": ("eval",),
    "osascript": ("-e",),
    "guile": ("-c", "-e"),
    "sbcl": ("--eval",),
    "clisp": ("-x",),
    "ecl": ("-eval",),
    "groovy": ("-e",),
    "scala": ("-e",),
    "kotlinc": ("-e", "-script"),
    "erl": ("-eval", "-s", "-run"),
    "escript": ("-e",),
    "elixir": ("-e", "--eval"),
    "iex": ("-e",),
    "racket": ("-e", "--eval"),
    "ocaml": ("-e",),
    "Rscript": ("-e",),
    "R": ("-e",),
    "octave": ("--eval",),
    "tclsh": (),
    "wish": (),
    "pwsh": ("-c", "-Command", "-command"),
    "powershell": ("-c", "-Command", "-command"),
    "nu": ("-c", "--commands"),
    "swift": ("-e",),
    "crystal": ("eval",),
}


def unmodelled_code(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Inline code in languages whose calls are not modelled here: what it runs is unknown."""
    marks = _UNMODELLED_CODE.get(cmd.name)
    if marks is None:
        return
    texts = [w.text for w in cmd.words[1:]]
    inline = any(t in marks or any(t.startswith(m) and len(m) == 2 for m in marks) for t in texts)
    from_input = cmd.stdin.piped and not [t for t in texts if not t.startswith("-")]
    if inline or from_input:
        yield Hit("ask", f"runs {cmd.name} code, which is not checked here")


# The gateway runs the command: its parent, its process group and pids computed at run time
# (pgrep chatgate) may be the gateway or its supervisor.
_PARENT = re.compile(r"\$\{?(PPID|\$|BASHPID)\b|^-|^0$|^1$")
_STOPS = frozenset({"STOP", "TSTP", "TTIN", "TTOU", "19", "20", "21", "22", "17"})


def signals_gateway(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """kill $PPID, kill -STOP $(pgrep -f chatgate), kill 0: may stop the gateway itself."""
    args = list(cmd.words[1:])
    texts = [w.text for w in args]
    if texts[:1] and texts[0] in ("-l", "-L", "--list", "--table"):
        return
    signal, targets = "", []
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--":
            targets += args[i:]
            break
        if text in ("-s", "-n", "--signal") and i < len(args):
            signal = args[i].text
            i += 1
        elif text.startswith("--signal="):
            signal = text.split("=", 1)[1]
        elif text.startswith("-") and len(text) > 1 and not signal and not targets:
            signal = text[1:]
        else:
            targets.append(args[i - 1])
    for word in targets:
        if _PARENT.search(word.raw or word.text) or (word.dynamic and word.subcommands):
            yield Hit("ask", f"kill {shown(texts, 60)} may signal the gateway itself")
            return
    if signal.upper().removeprefix("SIG") in _STOPS and targets:
        yield Hit("ask", f"kill -{signal} stops {shown([t.text for t in targets])}")


def node_packages(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """npm, pnpm, yarn, uv: both package runners (dlx, exec) and installers."""
    yield from package_runners(cmd, ctx)
    yield from installs_from_urls(cmd, ctx)


RULES: dict[str, Rule] = {
    "scp": copy_to_remote,
    "rsync": copy_to_remote,
    "curl": curl_uploads,
    "wget": wget_options,
    "wget2": wget_options,
    "git": git_remotes,
    "httpd": httpd,
    "lighttpd": httpd,
    "http-server": httpd,
    "npx": package_runners,
    "bunx": package_runners,
    "pnpx": package_runners,
    "uvx": package_runners,
    "pnpm": package_runners,
    "yarn": package_runners,
    "npm": package_runners,
    "pipx": package_runners,
    "uv": package_runners,
    "pip": installs_from_urls,
    "pip3": installs_from_urls,
    "bun": installs_from_urls,
    "go": installs_from_urls,
    "cargo": installs_from_urls,
    "gem": installs_from_urls,
    "make": make_stdin,
    "gmake": make_stdin,
    "sqlite3": sqlite_files,
    "sqlite": sqlite_files,
    "redis-cli": redis_keys,
    "valkey-cli": redis_keys,
    "keydb-cli": redis_keys,
    "memcflush": store_keys,
    "busctl": system_bus,
    "gdbus": system_bus,
    "dbus-send": system_bus,
    "qdbus": system_bus,
    "qdbus6": system_bus,
    "kill": signals_gateway,
    **dict.fromkeys(_UNMODELLED_CODE, unmodelled_code),
}
for _name in ("npm", "pnpm", "yarn", "uv"):
    RULES[_name] = node_packages
# Interpreters handed a server module or option (python -m http.server, php -S), or pip.
INTERPRETER_RULES: list[Rule] = [serves, installs_from_urls]
