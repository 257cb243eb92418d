"""Wrappers and shells that run other commands (`sudo -u root rm ...`, `bash -c '...'`,
`eval`): find what they run so that it is checked too."""

from __future__ import annotations

import re
from collections.abc import Callable

from tools.shell.safety.model import Command, Word
from tools.shell.safety.names import is_shell
from tools.shell.safety.parse import split_words
from tools.shell.safety.runners import RUNNERS
from tools.shell.safety.wrappers import Spec, Unwrapped, joined, skip

_SPECS: dict[str, Spec] = {
    "sudo": Spec(
        "ugCDhprtTU",
        frozenset(
            {
                "--user",
                "--group",
                "--close-from",
                "--chdir",
                "--host",
                "--prompt",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
            }
        ),
        True,
    ),
    "doas": Spec("uC"),
    "env": Spec("uC", frozenset({"--unset", "--chdir"}), True),
    "nohup": Spec(),
    "setsid": Spec(),
    "builtin": Spec(),
    "unbuffer": Spec(),
    "chronic": Spec(),
    "catchsegv": Spec(),
    "unshare": Spec(),
    "firejail": Spec(),
    "busybox": Spec(),
    "toybox": Spec(),
    "timeout": Spec("sk", frozenset({"--signal", "--kill-after"}), positionals=1),
    "nice": Spec("n", frozenset({"--adjustment"})),
    "ionice": Spec("cnp", frozenset({"--class", "--classdata", "--pid"})),
    "stdbuf": Spec("ioe", frozenset({"--input", "--output", "--error"})),
    "time": Spec("fo", frozenset({"--format", "--output"})),
    "exec": Spec("a"),
    "chroot": Spec("", frozenset({"--userspec", "--groups"}), positionals=1),
    "taskset": Spec("", positionals=1),
    "chrt": Spec("", positionals=1),
    "strace": Spec("oepsuEIbXPaS"),
    "ltrace": Spec("oepsuEnaA"),
    "fakeroot": Spec("lsi"),
    "nsenter": Spec("tSGw"),
    "pkexec": Spec("", frozenset({"--user"})),
    "proxychains": Spec("f"),
    "proxychains4": Spec("f"),
    "torsocks": Spec("uapP"),
    "runuser": Spec("ugGsw", frozenset({"--user", "--group", "--supp-group", "--shell"})),
    "caffeinate": Spec("t"),
    "systemd-run": Spec("pEu"),
    # Programs that run their arguments as a command after their own options.
    "eatmydata": Spec(),
    "nocache": Spec(),
    "faketime": Spec("p", frozenset({"--exclude-monotonic"}), positionals=1),
    "datefudge": Spec("", positionals=1),
    "cpulimit": Spec("lpe", frozenset({"--limit", "--pid", "--exe", "--cpu"})),
    "trickle": Spec("udwtln"),
    "tsocks": Spec(),
    "torify": Spec(),
    "gosu": Spec("", positionals=1),
    "su-exec": Spec("", positionals=1),
    "s6-setuidgid": Spec("", positionals=1),
    "chpst": Spec("uUenlLmdofcpr"),
    "setpriv": Spec(
        "",
        frozenset(
            {"--reuid", "--regid", "--groups", "--inh-caps", "--ambient-caps", "--bounding-set"}
        ),
    ),
    "setarch": Spec("", positionals=1),
    "linux32": Spec(),
    "linux64": Spec(),
    "numactl": Spec("NmCpiP"),
    "prlimit": Spec("p", frozenset({"--pid"})),
    "valgrind": Spec(),
    "xvfb-run": Spec("nsfepw"),
    "dbus-run-session": Spec(),
    "dbus-launch": Spec(),
    "ssh-agent": Spec("aEtP"),
    "tini": Spec("pe"),
    "dumb-init": Spec("r"),
    "rlwrap": Spec("bDfHlpPsSwz"),
    "lckdo": Spec("W", positionals=1),
    "daemonize": Spec("ceoplua"),
    "run-one": Spec(),
    "ifne": Spec(),
    "systemd-inhibit": Spec("", frozenset({"--what", "--who", "--why", "--mode"})),
    "cgexec": Spec("g"),
    "schroot": Spec("cudn"),
    "flatpak-spawn": Spec(),
    "with-contenv": Spec(),
    "cross-env": Spec("", assignments=True),
    "env-cmd": Spec("fre"),
    "npx": Spec("pc", frozenset({"--package"})),
    "bunx": Spec(),
    "pnpx": Spec(),
}
# `tool sub [options] command...`: the subcommand word(s) that make `tool` run a command.
_RUN_SUBCOMMANDS: dict[str, tuple[frozenset[str], Spec]] = {
    "poetry": (frozenset({"run"}), Spec()),
    "pipenv": (frozenset({"run"}), Spec()),
    "uv": (frozenset({"run"}), Spec("p", frozenset({"--with", "--python", "--project"}))),
    "pixi": (frozenset({"run", "exec"}), Spec("e", frozenset({"--environment"}))),
    "conda": (frozenset({"run"}), Spec("np", frozenset({"--name", "--prefix"}))),
    "mamba": (frozenset({"run"}), Spec("np", frozenset({"--name", "--prefix"}))),
    "micromamba": (frozenset({"run"}), Spec("np", frozenset({"--name", "--prefix"}))),
    "bundle": (frozenset({"exec"}), Spec()),
    "mise": (frozenset({"exec", "x"}), Spec("C", frozenset({"--cd"}))),
    "asdf": (frozenset({"exec"}), Spec()),
    "rtx": (frozenset({"exec", "x"}), Spec()),
    "npm": (frozenset({"exec", "x"}), Spec("c", frozenset({"--package", "--call"}))),
    "pnpm": (frozenset({"exec", "dlx"}), Spec()),
    "yarn": (frozenset({"exec", "dlx"}), Spec()),
    "direnv": (frozenset({"exec"}), Spec("", positionals=1)),
    "op": (frozenset({"run"}), Spec("", frozenset({"--env-file"}))),
    "doppler": (frozenset({"run"}), Spec("pc", frozenset({"--project", "--config"}))),
    "dotenv": (frozenset({"run"}), Spec("fe")),
    "aws-vault": (frozenset({"exec"}), Spec("", positionals=1)),
    "perf": (frozenset({"stat", "record", "trace"}), Spec("eopcCF")),
    "toolbox": (frozenset({"run"}), Spec("cr", frozenset({"--container", "--release"}))),
    "nix": (frozenset({"develop", "shell"}), Spec("c")),
    "ip": (frozenset({"netns"}), Spec()),
}


def unwrap(cmd: Command) -> Unwrapped:
    """What `cmd` runs in turn, if it is a wrapper, a shell or a command runner."""
    if not cmd.words:
        return Unwrapped()
    name, args = cmd.name, list(cmd.words[1:])
    if name in _RUN_SUBCOMMANDS:
        return _run_subcommand(name, args)
    special = _SPECIAL.get(name)
    if special is not None:
        return special(args, cmd)
    if is_shell(name):
        return _shell(args, cmd)
    spec = _SPECS.get(name)
    if spec is None:
        return Unwrapped()
    if name in ("runuser",) and any(a.text in ("-c", "--command") for a in args):
        return _su(args, cmd)
    rest = args[skip(args, spec) :]
    return Unwrapped(inner=[tuple(rest)] if rest else [])


def _run_subcommand(name: str, args: list[Word]) -> Unwrapped:
    """`poetry run X`, `uv run X`, `ip netns exec NS X`, `nix develop -c X` ..."""
    subs, spec = _RUN_SUBCOMMANDS[name]
    texts = [a.text for a in args]
    at = next((i for i, t in enumerate(texts) if not t.startswith("-")), None)
    if at is None or texts[at] not in subs:
        return Unwrapped()
    rest = args[at + 1 :]
    if name == "ip":  # ip netns exec NAME command...
        rest = rest[2:] if [w.text for w in rest[:1]] == ["exec"] else []
    elif name == "nix":  # nix develop|shell [installables] -c command...
        cut = [w.text for w in rest]
        rest = rest[cut.index("-c") + 1 :] if "-c" in cut else []
        return Unwrapped(inner=[tuple(rest)] if rest else [])
    rest = rest[skip(rest, spec) :]
    return Unwrapped(inner=[tuple(rest)] if rest else [])


def _shell(args: list[Word], cmd: Command) -> Unwrapped:
    """sh -c 'script' runs the script; sh with no operand runs its standard input."""
    has_c = reads_stdin = False
    i = 0
    while i < len(args):
        text = args[i].text
        i += 1
        if text == "--" or text == "-":
            break
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 1
        elif text.startswith(("-", "+")) and not text.startswith("--") and len(text) > 1:
            has_c |= "c" in text
            reads_stdin |= "s" in text
        elif not text.startswith("--"):
            i -= 1
            break
    operand = args[i] if i < len(args) else None
    if has_c and operand is not None:
        return Unwrapped(scripts=[operand], positional=tuple(args[i + 1 :]))
    if (operand is None or reads_stdin or operand.text in ("/dev/stdin", "-")) and (
        cmd.stdin.text is not None
    ):
        return Unwrapped(scripts=[Word.literal(cmd.stdin.text)])
    return Unwrapped()


def _eval(args: list[Word], cmd: Command) -> Unwrapped:
    return Unwrapped(scripts=[joined(args)] if args else [])


def _source(args: list[Word], cmd: Command) -> Unwrapped:
    if args and args[0].text in ("/dev/stdin", "-") and cmd.stdin.text is not None:
        return Unwrapped(scripts=[Word.literal(cmd.stdin.text)])
    return Unwrapped()


def _command(args: list[Word], cmd: Command) -> Unwrapped:
    flags = [a.text for a in args if a.text.startswith("-")][:3]
    if "-v" in flags or "-V" in flags:
        return Unwrapped()  # only looks the name up
    start = skip(args, Spec())
    return Unwrapped(inner=[tuple(args[start:])] if start < len(args) else [])


def _env(args: list[Word], cmd: Command) -> Unwrapped:
    for i, word in enumerate(args):
        text = word.text
        if text in ("-S", "--split-string") and i + 1 < len(args):
            split = [Word.literal(t) for t in split_words(args[i + 1].text)]
            return Unwrapped(inner=[(*split, *args[i + 2 :])])
        if text.startswith(("--split-string=", "-S")) and len(text) > 2:
            value = text.split("=", 1)[1] if text.startswith("--") else text[2:]
            return Unwrapped(
                inner=[(*(Word.literal(t) for t in split_words(value)), *args[i + 1 :])]
            )
    rest = args[skip(args, _SPECS["env"]) :]
    return Unwrapped(inner=[tuple(rest)] if rest else [])


def _su(args: list[Word], cmd: Command) -> Unwrapped:
    for i, word in enumerate(args):
        if word.text in ("-c", "--command") and i + 1 < len(args):
            return Unwrapped(scripts=[args[i + 1]])
        if word.text.startswith("--command="):
            return Unwrapped(scripts=[Word.literal(word.text.split("=", 1)[1])])
    if cmd.name == "runuser":
        rest = args[skip(args, _SPECS["runuser"]) :]
        return Unwrapped(inner=[tuple(rest)] if rest else [])
    return Unwrapped()


def _sg(args: list[Word], cmd: Command) -> Unwrapped:
    rest = [a for a in args if a.text not in ("-", "-c")][1:]
    return Unwrapped(scripts=[joined(rest)] if rest else [])


def _script(args: list[Word], cmd: Command) -> Unwrapped:
    for i, word in enumerate(args):
        text = word.text
        clustered = re.fullmatch(r"-[a-zA-Z]*c", text) is not None
        if (text == "--command" or clustered) and i + 1 < len(args):
            return Unwrapped(scripts=[args[i + 1]])
        if text.startswith("--command="):
            return Unwrapped(scripts=[Word.literal(text.split("=", 1)[1])])
    return Unwrapped()


def _sudo(args: list[Word], cmd: Command) -> Unwrapped:
    """sudo runs its command directly, or through a shell with -s/-i."""
    spec = _SPECS["sudo"]
    start = skip(args, spec)
    rest = args[start:]
    options = [a.text for a in args[:start]]
    via_shell = any(
        o in ("--shell", "--login")
        or (o.startswith("-") and not o.startswith("--") and set(o[1:]) & {"s", "i"})
        for o in options
    )
    if via_shell and rest:
        return Unwrapped(scripts=[joined(rest)])
    return Unwrapped(inner=[tuple(rest)] if rest else [])


def _coproc(args: list[Word], cmd: Command) -> Unwrapped:
    """coproc cmd ..., coproc NAME { cmd ...; }: the command runs in the background."""
    texts = [a.text for a in args[:2]]
    if len(texts) == 2 and texts[1] == "{":
        args = args[2:]
    elif texts[:1] == ["{"]:
        args = args[1:]
    return Unwrapped(inner=[tuple(args)] if args else [])


def _trap(args: list[Word], cmd: Command) -> Unwrapped:
    if args and args[0].text not in ("-p", "-l", "--", "-"):
        return Unwrapped(scripts=[args[0]])
    return Unwrapped()


def _alias(args: list[Word], cmd: Command) -> Unwrapped:
    """Aliases may be expanded later (shopt -s expand_aliases), so their text is code."""
    scripts = []
    for word in args:
        name, eq, value = word.text.partition("=")
        if eq and name:
            scripts.append(
                Word(text=value, pattern=value, dynamic=word.dynamic, subcommands=word.subcommands)
            )
    return Unwrapped(scripts=scripts)


def _option_scripts(*options: str) -> Callable[[list[Word], Command], Unwrapped]:
    """Programs whose named options carry shell code (nix-shell --run 'cmd')."""

    def handler(args: list[Word], cmd: Command) -> Unwrapped:
        scripts = [args[i + 1] for i, a in enumerate(args[:-1]) if a.text in options]
        return Unwrapped(scripts=scripts)

    return handler


def _hyperfine(args: list[Word], cmd: Command) -> Unwrapped:
    """hyperfine benchmarks shell commands: operands and --prepare/--setup/--cleanup."""
    spec = Spec("wrmMpscnuS", frozenset({"--warmup", "--runs", "--prepare", "--setup"}))
    scripts = [args[i + 1] for i, a in enumerate(args[:-1]) if a.text in _HYPERFINE_CODE]
    start = skip(args, spec)
    return Unwrapped(scripts=[*scripts, *(a for a in args[start:] if not a.text.startswith("-"))])


_HYPERFINE_CODE = frozenset({"-p", "--prepare", "-s", "--setup", "-c", "--cleanup"})


def _entr(args: list[Word], cmd: Command) -> Unwrapped:
    start = skip(args, Spec())
    rest = args[start:]
    if any(a.text.startswith("-") and "s" in a.text for a in args[:start]) and rest:
        return Unwrapped(scripts=[rest[0]])
    return Unwrapped(inner=[tuple(rest)] if rest else [])


def _after_marker(marker: str) -> Callable[[list[Word], Command], Unwrapped]:
    """gdb --args prog ..., lldb -- prog ...: the program being debugged runs."""

    def handler(args: list[Word], cmd: Command) -> Unwrapped:
        texts = [a.text for a in args]
        rest = args[texts.index(marker) + 1 :] if marker in texts else []
        return Unwrapped(inner=[tuple(rest)] if rest else [])

    return handler


_SPECIAL: dict[str, Callable[[list[Word], Command], Unwrapped]] = {
    "eval": _eval,
    "source": _source,
    ".": _source,
    "command": _command,
    "env": _env,
    "su": _su,
    "sg": _sg,
    "script": _script,
    "trap": _trap,
    "coproc": _coproc,
    "alias": _alias,
    "sudo": _sudo,
    "nix-shell": _option_scripts("--run", "--command"),
    "hyperfine": _hyperfine,
    "entr": _entr,
    "gdb": _after_marker("--args"),
    "lldb": _after_marker("--"),
    **RUNNERS,
}
WRAPPER_NAMES = frozenset({*_SPECS, *_SPECIAL, *_RUN_SUBCOMMANDS})
