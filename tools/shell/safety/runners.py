"""Commands that run other commands on items, later, elsewhere or in a terminal:
xargs, parallel, find -exec, at, watch, flock, ssh, tmux, screen, docker/kubectl exec."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tools.shell.safety.model import Command, Word
from tools.shell.safety.parse import split_words
from tools.shell.safety.wrappers import INPUT_ITEMS, MAX_ITEMS, Spec, Unwrapped, fill, joined, skip


def _xargs(args: list[Word], cmd: Command) -> Unwrapped:
    """xargs runs its command with input items appended, or put in place of -I's string."""
    spec = Spec(
        "aEdILnPs",
        frozenset(
            {
                "--arg-file",
                "--delimiter",
                "--eof",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            }
        ),
    )
    start = skip(args, spec)
    rest = args[start:] or [Word.literal("echo")]
    replace = _xargs_replace(args[:start])
    text = (
        cmd.stdin.text
        if not any(a.text.startswith(("-a", "--arg-file")) for a in args[:start])
        else None
    )
    if text is None:
        if replace:
            return Unwrapped(inner=[tuple(fill(w, replace, INPUT_ITEMS) for w in rest)])
        return Unwrapped(inner=[(*rest, INPUT_ITEMS)])
    if replace:
        lines = [line for line in text.splitlines() if line.strip()][:MAX_ITEMS]
        return Unwrapped(
            inner=[tuple(fill(w, replace, Word.literal(line)) for w in rest) for line in lines]
        )
    return Unwrapped(inner=[(*rest, *(Word.literal(t) for t in split_words(text)))])


def _xargs_replace(options: Sequence[Word]) -> str:
    for i, word in enumerate(options):
        text = word.text
        if text == "-I" and i + 1 < len(options):
            return options[i + 1].text
        if text.startswith("-I") and len(text) > 2:
            return text[2:]
        if text == "-i" or text.startswith(("--replace", "-i")):
            return text.partition("=")[2] or text[2:] or "{}"
    return ""


def _parallel(args: list[Word], cmd: Command) -> Unwrapped:
    """GNU parallel: `parallel cmd ::: a b` runs cmd with each item; items alone are commands."""
    spec = Spec(
        "jPSXEIdaL",
        frozenset(
            {
                "--jobs",
                "--sshlogin",
                "--delimiter",
                "--arg-file",
                "--joblog",
                "--results",
                "--timeout",
            }
        ),
    )
    start = skip(args, spec)
    texts = [w.text for w in args]
    cut = next(
        (i for i in range(start, len(args)) if texts[i] in (":::", "::::", ":::+")), len(args)
    )
    command = args[start:cut]
    items = [w for w in args[cut + 1 :] if w.text not in (":::", "::::", ":::+")][:MAX_ITEMS]
    if cut == len(args):
        items = [INPUT_ITEMS]
    if not command:
        return Unwrapped(scripts=items)
    inner = [
        tuple(fill(w, "{}", item) for w in command)
        if any("{}" in w.text for w in command)
        else (*command, item)
        for item in items
    ]
    return Unwrapped(inner=inner)


def _at(args: list[Word], cmd: Command) -> Unwrapped:
    """at and batch run the commands they read on standard input later."""
    if cmd.stdin.text is not None and not any(a.text.startswith("-f") for a in args):
        return Unwrapped(scripts=[Word.literal(cmd.stdin.text)])
    return Unwrapped()


def _find(args: list[Word], cmd: Command) -> Unwrapped:
    """find runs -exec/-execdir/-ok commands with {} standing for each path it finds."""
    starts, i = find_starts(args)
    inner: list[tuple[Word, ...]] = []
    while i < len(args):
        if args[i].text in ("-exec", "-execdir", "-ok", "-okdir"):
            j = i + 1
            while j < len(args) and args[j].text not in (";", "+"):
                j += 1
            for start in starts:
                argv = tuple(_replace_braces(w, start) for w in args[i + 1 : j])
                if argv:
                    inner.append(argv)
            i = j
        i += 1
    return Unwrapped(inner=inner)


def _replace_braces(word: Word, start: Word) -> Word:
    if "{}" not in word.text:
        return word
    return Word(
        text=word.text.replace("{}", start.text),
        pattern=word.pattern.replace("{}", start.pattern),
        dynamic=word.dynamic or start.dynamic,
        computed=word.computed,
    )


def find_starts(args: Sequence[Word]) -> tuple[list[Word], int]:
    """The start paths of a find command and the index where its expression begins."""
    i = 0
    while i < len(args) and (
        args[i].text in ("-H", "-L", "-P", "-D") or re.fullmatch(r"-O\d*", args[i].text)
    ):
        i += 2 if args[i].text == "-D" else 1
    starts: list[Word] = []
    while i < len(args) and not args[i].text.startswith(("-", "(", "!", ")")):
        starts.append(args[i])
        i += 1
    return starts or [Word.literal(".")], i


def _watch(args: list[Word], cmd: Command) -> Unwrapped:
    spec = Spec("nq", frozenset({"--interval", "--equexit"}))
    start = skip(args, spec)
    rest = args[start:]
    if any(a.text in ("-x", "--exec") for a in args[:start]):
        return Unwrapped(inner=[tuple(rest)] if rest else [])
    return Unwrapped(scripts=[joined(rest)] if rest else [])


def _flock(args: list[Word], cmd: Command) -> Unwrapped:
    i = skip(args, Spec("wE", frozenset({"--timeout", "--wait", "--conflict-exit-code"})))
    rest = args[i + 1 :]  # skip the lock file
    if rest and rest[0].text in ("-c", "--command") and len(rest) > 1:
        return Unwrapped(scripts=[rest[1]])
    return Unwrapped(inner=[tuple(rest)] if rest else [])


def _ssh(args: list[Word], cmd: Command) -> Unwrapped:
    """ssh host cmd... runs cmd (joined) through a shell on the remote side."""
    rest = args[skip(args, Spec("BbcDEeFIiJLlmOoPpQRSWw")) :]
    return Unwrapped(scripts=[joined(rest[1:])] if len(rest) > 1 else [])


def _tmux(args: list[Word], cmd: Command) -> Unwrapped:
    """tmux new/split-window/run-shell take a shell command; send-keys types one."""
    start = skip(args, Spec("LSfc"))
    if start >= len(args):
        return Unwrapped()
    sub, rest = args[start].text, args[start + 1 :]
    if sub in ("send-keys", "send"):
        keys = [w for w in skip_options(rest, "tN") if w.text not in _KEY_NAMES]
        return Unwrapped(scripts=[joined(keys)] if keys else [])
    if sub in _TMUX_COMMANDS:
        command = skip_options(rest, "cdt" if sub.startswith("run") else "cefFnstxyl")
        return Unwrapped(scripts=[joined(command)] if command else [])
    return Unwrapped()


def skip_options(words: Sequence[Word], short_args: str) -> list[Word]:
    return list(words[skip(words, Spec(short_args)) :])


def _screen(args: list[Word], cmd: Command) -> Unwrapped:
    texts = [w.text for w in args]
    if "-X" in texts:  # screen -X stuff 'text': typed into a running shell
        after = args[texts.index("-X") + 1 :]
        if after and after[0].text == "stuff":
            return Unwrapped(scripts=[joined(after[1:])])
        return Unwrapped()
    rest = args[skip(args, Spec("SceEhpTtsl")) :]
    return Unwrapped(inner=[tuple(rest)] if rest else [])


def _container_exec(args: list[Word], cmd: Command) -> Unwrapped:
    """docker/podman/kubectl exec run a command in a container, where data still lives."""
    texts = [w.text for w in args]
    if cmd.name == "kubectl":
        if "exec" not in texts or "--" not in texts:
            return Unwrapped()
        rest = args[texts.index("--") + 1 :]
        return Unwrapped(inner=[tuple(rest)] if rest else [])
    sub = next((i for i, t in enumerate(texts) if not t.startswith("-")), None)
    if sub is None or texts[sub] != "exec":
        if sub is not None and texts[sub] == "compose" and "exec" in texts[sub:]:
            rest = args[texts.index("exec") + 1 :]
            rest = rest[
                skip(rest, Spec("euwT", frozenset({"--env", "--user", "--workdir", "--index"})))
                + 1 :
            ]
            return Unwrapped(inner=[tuple(rest)] if rest else [])
        return Unwrapped()
    rest = args[sub + 1 :]
    rest = rest[
        skip(
            rest,
            Spec("euw", frozenset({"--env", "--user", "--workdir", "--env-file", "--detach-keys"})),
        )
        + 1 :
    ]
    return Unwrapped(inner=[tuple(rest)] if rest else [])


_TMUX_COMMANDS = frozenset(
    {
        "new",
        "new-session",
        "new-window",
        "neww",
        "split-window",
        "splitw",
        "respawn-pane",
        "respawnp",
        "respawn-window",
        "respawnw",
        "run-shell",
        "run",
        "display-popup",
        "popup",
    }
)
_KEY_NAMES = frozenset({"Enter", "C-m", "C-j", "KPEnter", "Space", "Tab"})

RUNNERS: dict[str, Callable[[list[Word], Command], Unwrapped]] = {
    "xargs": _xargs,
    "find": _find,
    "watch": _watch,
    "flock": _flock,
    "ssh": _ssh,
    "parallel": _parallel,
    "at": _at,
    "batch": _at,
    "tmux": _tmux,
    "screen": _screen,
    "docker": _container_exec,
    "podman": _container_exec,
    "nerdctl": _container_exec,
    "kubectl": _container_exec,
    "oc": _container_exec,
}
