"""The shape of a command: what approving it "for this session" remembers. It names the
program, its subcommand, its flags and its exact targets, so that it never covers more."""

from __future__ import annotations

import re

from tools.shell.exact import exact as exact
from tools.shell.safety.model import Command, Word
from tools.shell.safety.names import PACKAGE_MANAGERS, is_interpreter, is_shell
from tools.shell.safety.paths import HOME, Scope
from tools.shell.safety.unwrap import WRAPPER_NAMES

# Tools whose first operand is a subcommand (git push, docker rm); their other operands are
# names (branches, containers) unless they look like paths.
SUBCOMMAND_TOOLS = PACKAGE_MANAGERS | frozenset(
    {
        "git",
        "docker",
        "docker-compose",
        "podman",
        "podman-compose",
        "nerdctl",
        "systemctl",
        "service",
        "kubectl",
        "oc",
        "helm",
        "crontab",
        "ufw",
        "nft",
        "loginctl",
        "terraform",
        "tofu",
        "terragrunt",
        "pulumi",
        "aws",
        "gcloud",
        "gsutil",
        "az",
        "gh",
        "glab",
        "rclone",
        "restic",
        "borg",
        "vault",
        "consul",
        "etcdctl",
        "virsh",
        "vagrant",
        "multipass",
        "lxc",
        "incus",
        "mysqladmin",
    }
)
# Options of those tools that take a value, kept together with it (git -C repo).
_VALUE_OPTIONS = frozenset(
    {"-C", "-c", "-H", "--host", "--context", "-n", "--namespace", "--profile", "--region"}
)
# Tools whose single-dash options are whole words (find -delete), not letter clusters.
_WORD_OPTIONS = frozenset(
    {
        "find",
        "openssl",
        "java",
        "go",
        "ffmpeg",
        "sqlite3",
        "tar",
        "kill",
        "terraform",
        "tofu",
        "gdb",
        "lldb",
        "expect",
    }
)
# A cluster of up to three boolean letters (-rf, -fdx) is split so its order does not
# matter; longer runs are more likely an option with its value (-uroot) and stay whole.
_CLUSTER = re.compile(r"-[A-Za-z]{1,3}")
# Tools whose arguments mean different things in another order (find . -name x -delete).
_ORDERED = frozenset({"find", "ffmpeg", "java", "iptables", "ip6tables", "nft", "tc", "ip", "jq"})
# Tools whose operands are names (processes, users, services), never paths.
_NAMES = frozenset(
    {
        "kill",
        "pkill",
        "killall",
        "killall5",
        "skill",
        "slay",
        "userdel",
        "deluser",
        "groupdel",
        "delgroup",
        "passwd",
        "usermod",
        "chage",
        "dropdb",
        "dropuser",
        "psql",
        "mysql",
        "mariadb",
        "redis-cli",
        "mongo",
        "mongosh",
        "ssh",
        "init",
        "telinit",
        "shutdown",
        "curl",
        "wget",
        "nc",
        "ncat",
        "netcat",
        "socat",
        "dig",
        "nslookup",
        "host",
    }
)
# Bare words of these are names, text and code, not files.
_LITERAL_BARE = (
    _ORDERED | WRAPPER_NAMES | frozenset({"echo", "printf", ":", "true", "false", "test", "["})
)
_REMOTE = re.compile(r"[\w.@-]+:(?!/)|[a-z][a-z0-9+.-]*://", re.I)
_PATHLIKE = re.compile(r"[/~*?\[]|^\.\.?$")
# What a file name plausibly looks like; code, key=value pairs and the like stay as written.
_PATH_CHARS = re.compile(r"[\w./~*?\[\]@%+,:-]+")


def shape_of(cmd: Command, scope: Scope | None = None) -> str:
    """`rm -f -r /ws/build`, `git push --force origin main`, `kill -9 4242 > /ws/log`.

    Letter clusters are split and flags sorted (so `-rf` and `-f -r` agree), operands keep
    their order, relative paths are joined to the working directory, and redirects count.
    """
    if not cmd.words:
        return " ".join(_redirects(cmd, scope)) or "(redirection)"
    name = cmd.name
    first = cmd.words[0]
    # ./deploy.sh is not /opt/deploy.sh: a name given with a directory keeps it.
    program = _operand(first, scope, "") if "/" in first.text or first.dynamic else name
    if name in _ORDERED:
        words = [_operand(w, scope, name) for w in cmd.words[1:]]
        return " ".join([program, *words, *_redirects(cmd, scope)])
    head = [program]
    flags: list[str] = []
    operands: list[str] = []
    want_sub = name in SUBCOMMAND_TOOLS
    pending = ""  # a value option waiting for its value
    for word in cmd.words[1:]:
        text = word.text
        if pending:
            flags.append(f"{pending} {_operand(word, scope, name, named=True)}")
            pending = ""
        elif text.startswith("-") and len(text) > 1 and not word.dynamic:
            if name in SUBCOMMAND_TOOLS and text in _VALUE_OPTIONS:
                pending = text
            elif _CLUSTER.fullmatch(text) and name not in _WORD_OPTIONS:
                flags.extend("-" + ch for ch in text[1:])
            else:
                flags.append(quoted(text))
        elif want_sub and not word.dynamic:
            head.append(text)
            want_sub = False
        else:
            operands.append(_operand(word, scope, name, named=name in SUBCOMMAND_TOOLS))
    if pending:
        flags.append(pending)
    return " ".join([*head, *sorted(set(flags)), *operands, *_redirects(cmd, scope)])


def _operand(word: Word, scope: Scope | None, name: str, *, named: bool = False) -> str:
    """A path joined to the working directory; anything else as written. Nothing is
    normalised away, so two different words never render alike."""
    text = word.text
    if word.dynamic or word.procsub:
        return word.raw or text
    bare = not _PATHLIKE.search(text)
    if (
        name in _NAMES
        or not _PATH_CHARS.fullmatch(text)
        or _REMOTE.match(text)
        or re.fullmatch(r"[-+]?\d+", text)
        or (bare and (named or name in _LITERAL_BARE or is_shell(name) or is_interpreter(name)))
        or text.startswith("-")
    ):
        return quoted(text)
    scope = scope or Scope()
    if text.startswith(("/", "~")):
        return _linked(text, scope)
    bases = [scope.start or "", *scope.others]
    return "|".join(
        dict.fromkeys(_linked(f"{show_path(b)}/{text}", scope) if b else text for b in bases)
    )


def _linked(path: str, scope: Scope) -> str:
    """A path with where it really leads when a symbolic link is on the way (`out/` that
    became a link to /etc is not the `out/` that was approved)."""
    real = scope.real(path)
    return f"{path} (-> {real})" if real else path


def _redirects(cmd: Command, scope: Scope | None) -> list[str]:
    out: list[str] = []
    for redirect in cmd.redirects:
        target = redirect.target
        if target is None or redirect.op in ("<<", "<<-"):
            continue
        shown = quoted(target.text) if redirect.op == "<<<" else _operand(target, scope, "")
        out.append(f"{redirect.op} {shown}")
    return out


def show_path(path: str) -> str:
    return "~" + path[len(HOME) :] if path.startswith(HOME) else path


def quoted(text: str) -> str:
    """Text with spaces stays one visible unit, so `a b` and `'a b'` cannot collide."""
    return repr(text) if re.search(r"\s|['\"]", text) or not text else text
