"""Files written and then run within one command line: `echo ... > x.sh; sh x.sh`,
`curl -o i.sh URL && bash i.sh`. What was written is judged as the code that runs."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass

from tools.shell.safety.model import Command
from tools.shell.safety.names import interpreter_family, is_interpreter, is_shell
from tools.shell.safety.rules_fs import write_targets
from tools.shell.safety.textflow import static_output

_SHEBANG = re.compile(r"#!\s*\S*?(?:env\s+)?(?:\S*/)?(python|perl|ruby|node|php|lua)")


@dataclass(frozen=True)
class Written:
    content: str | None  # None: not knowable (downloaded, copied from elsewhere)
    producers: frozenset[str]  # the command that wrote it and what fed that command
    # The writing command and what fed it, as shapes (`curl -o /ws/i.sh https://x`), so
    # approving a run of the file names where it came from.
    source: str = ""


@dataclass(frozen=True)
class Run:
    path: str
    kind: str  # "shell" or an interpreter family ("python")
    file: Written


class WrittenFiles:
    """Remembers what each command wrote, to judge it when a later command runs it."""

    def __init__(self) -> None:
        self._files: dict[str, Written] = {}

    def note(self, cmd: Command, shape: Callable[[], str] = str) -> None:
        """Remember what `cmd` writes; `shape` gives its shape (asked for only if it writes)."""
        if not write_targets(cmd):
            return
        output = static_output(cmd)
        producers = frozenset({cmd.name}) | cmd.stdin.producers
        source = " | ".join([*cmd.stdin.upstream, shape()])
        for redirect in cmd.redirects:
            if redirect.writes and redirect.target is not None:
                self._remember(redirect.target.text, Written(output, producers, source))
        if cmd.name in ("cp", "mv", "install", "ln") and len(cmd.words) >= 3:
            copied = self._files.get(_key(cmd.words[-2].text))
            self._remember(cmd.words[-1].text, copied or Written(None, producers, source))
        elif cmd.name not in ("echo", "printf"):
            content = cmd.stdin.text if cmd.name == "tee" else None
            for target in write_targets(cmd):
                if not any(r.target is target for r in cmd.redirects):
                    self._remember(target.text, Written(content, producers, source))

    def executed(self, cmd: Command) -> Run | None:
        found = _script_of(cmd)
        if found is None:
            return None
        path, kind = found
        written = self._files.get(_key(path))
        if written is None:
            return None
        if kind == "file" and written.content is not None:
            match = _SHEBANG.match(written.content)
            kind = match.group(1) if match else "shell"
        return Run(path, "shell" if kind == "file" else kind, written)

    def _remember(self, path: str, written: Written) -> None:
        if len(self._files) < 64 and "$" not in path:
            self._files[_key(path)] = written


def _key(path: str) -> str:
    return posixpath.normpath(path) if path else path


def _script_of(cmd: Command) -> tuple[str, str] | None:
    """The file a command runs as code, and as what ("shell", "python", or "file")."""
    if not cmd.words:
        return None
    args = [w.text for w in cmd.words[1:]]
    name = cmd.name
    if name in ("source", "."):
        return (args[0], "shell") if args else None
    if is_shell(name) or is_interpreter(name):
        operand = _first_operand(args)
        if operand is None:
            return None
        return operand, "shell" if is_shell(name) else interpreter_family(name)
    if "/" in cmd.words[0].text:
        return cmd.words[0].text, "file"
    return None


def _first_operand(args: list[str]) -> str | None:
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-c", "-e", "-E", "-m", "-r", "--eval", "--command") or re.fullmatch(
            r"-[a-zA-Z]*c", arg
        ):
            return None  # code comes from an argument, not a file
        if arg in ("-o", "+o", "-O", "+O", "-W", "-X", "--rcfile", "--init-file"):
            i += 2
            continue
        if arg.startswith(("-", "+")) and arg != "-":
            i += 1
            continue
        return None if arg == "-" else arg
    return None
