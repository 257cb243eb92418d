"""Rules for commands that stop the machine, kill processes, remove packages, or rewrite
history and containers (git, docker, systemctl, package managers)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from tools.shell.safety.argv import Flags, first_operand, parse_flags
from tools.shell.safety.context import Context, Rule, shown
from tools.shell.safety.model import Command, Hit, Word
from tools.shell.safety.names import PACKAGE_MANAGERS, is_interpreter

_POWER_SUBCOMMANDS = frozenset({"poweroff", "reboot", "halt", "kexec", "soft-reboot"})
_SYSTEMCTL_ASK = frozenset(
    {
        "stop",
        "disable",
        "mask",
        "kill",
        "isolate",
        "emergency",
        "rescue",
        "suspend",
        "hibernate",
        "hybrid-sleep",
        "default",
        "daemon-reexec",
        "daemon-reload",
        "set-property",
        "set-environment",
        "unset-environment",
        "import-environment",
        "edit",
        "link",
        "revert",
        "reset-failed",
        "freeze",
        "terminate-user",
        "terminate-session",
        "terminate-seat",
        "kill-user",
        "kill-session",
        "lock-session",
        "lock-sessions",
        "disable-linger",
        "enable-linger",
        "attach",
        "flush-devices",
    }
)


def power(cmd: Command, ctx: Context) -> Iterator[Hit]:
    yield Hit("block", f"{cmd.name} stops or restarts the machine")


def init(cmd: Command, ctx: Context) -> Iterator[Hit]:
    level = cmd.args[:1]
    if level in (("0",), ("6",)):
        yield Hit("block", f"{cmd.name} {level[0]} stops or restarts the machine")
    elif level and level[0] in ("1", "s", "S", "single"):
        yield Hit("ask", f"{cmd.name} {level[0]} switches to single-user mode")


def systemctl(cmd: Command, ctx: Context) -> Iterator[Hit]:
    sub, rest = first_operand(
        cmd.words[1:],
        "HMnopst",
        (
            "--host",
            "--machine",
            "--property",
            "--type",
            "--state",
            "--signal",
            "--output",
            "--root",
            "--lines",
        ),
    )
    units = shown(w.text for w in rest)
    targets = {w.text.removesuffix(".target") for w in rest}
    if sub in ("start", "isolate", "restart") and targets & _POWER_SUBCOMMANDS:
        yield Hit("block", f"{cmd.name} {sub} {units} stops or restarts the machine")
    elif sub in _POWER_SUBCOMMANDS:
        yield Hit("block", f"{cmd.name} {sub} stops or restarts the machine")
    elif sub in _SYSTEMCTL_ASK:
        yield Hit("ask", f"{cmd.name} {sub} {units}".strip() + " changes services or sessions")


def service(cmd: Command, ctx: Context) -> Iterator[Hit]:
    if len(cmd.args) >= 2 and cmd.args[1] in ("stop", "disable", "kill", "zap"):
        yield Hit("ask", f"service {cmd.args[0]} {cmd.args[1]} stops a service")


def kill(cmd: Command, ctx: Context) -> Iterator[Hit]:
    args = list(cmd.args)
    if args[:1] and args[0] in ("-l", "-L", "--list", "--table"):
        return
    signal, targets = _kill_args(args)
    if "-1" in targets or (signal == "1" and not targets):
        yield Hit("block", "kill -1 signals every process the user can reach")
        return
    sig = (signal or "").upper().removeprefix("SIG")
    if sig in ("9", "KILL"):
        # The shape names the signal and the exact pids: kill -9 4242 is not kill -9 1.
        shape = " ".join(["kill -KILL", *targets])
        yield Hit("ask", f"kill -9 stops {shown(targets)} without letting it clean up", shape=shape)


def _kill_args(args: list[str]) -> tuple[str | None, list[str]]:
    signal: str | None = None
    targets: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            return signal, targets + args[i:]
        if arg in ("-s", "-n", "--signal") and i < len(args):
            signal = args[i]
            i += 1
        elif arg.startswith("--signal="):
            signal = arg.split("=", 1)[1]
        elif arg.startswith("-") and signal is None and not targets:
            signal = arg[1:]
        else:
            targets.append(arg)
    return signal, targets


def kill_by_name(cmd: Command, ctx: Context) -> Iterator[Hit]:
    yield Hit("ask", f"{cmd.name} kills processes by name ({shown(cmd.args)})")


_REMOVE_SUBCOMMANDS: dict[str, frozenset[str]] = {
    "apt": frozenset({"remove", "purge", "autoremove", "autopurge"}),
    "yum": frozenset({"remove", "erase", "autoremove"}),
    "zypper": frozenset({"remove", "rm"}),
    "apk": frozenset({"del"}),
    "brew": frozenset({"uninstall", "remove", "rm", "autoremove"}),
    "pip": frozenset({"uninstall"}),
    "snap": frozenset({"remove"}),
    "flatpak": frozenset({"uninstall", "remove"}),
    "gem": frozenset({"uninstall"}),
    "cargo": frozenset({"uninstall"}),
    "conda": frozenset({"remove", "uninstall"}),
    "port": frozenset({"uninstall"}),
    "npm": frozenset({"uninstall", "remove", "rm", "un", "r", "unlink"}),
}
_SAME_AS = {
    "apt-get": "apt",
    "aptitude": "apt",
    "dnf": "yum",
    "microdnf": "yum",
    "tdnf": "yum",
    "pip3": "pip",
    "pipx": "pip",
    "uv": "pip",
    "mamba": "conda",
    "micromamba": "conda",
    "pnpm": "npm",
}


def packages(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Package removal: the system or a project may stop working."""
    name, words = _SAME_AS.get(cmd.name, cmd.name), list(cmd.words[1:])
    if is_interpreter(cmd.name) and [w.text for w in words[:2]] == ["-m", "pip"]:
        name, words = "pip", words[2:]
    texts = [w.text for w in words]
    if name == "dpkg":
        flags = parse_flags(words)
        removing = flags.has("-r", "-P", "--remove", "--purge")
    elif name == "pacman":
        removing = any(re.fullmatch(r"-R\w*|--remove", t) for t in texts)
    elif name == "nix-env":
        removing = any(t in ("-e", "--uninstall") for t in texts)
    elif name == "yarn":
        removing = texts[:2] == ["global", "remove"]
    elif name in _REMOVE_SUBCOMMANDS:
        sub, _ = first_operand(words, "", ())
        if cmd.name == "uv":
            sub = texts[1] if texts[:1] == ["pip"] and len(texts) > 1 else ""
        removing = sub in _REMOVE_SUBCOMMANDS[name]
        if name == "npm" and removing and cmd.name != "pnpm":
            removing = any(t in ("-g", "--global") for t in texts)
    else:
        return
    if removing:
        yield Hit("ask", f"removes packages ({cmd.line()[:80]})")


def compose(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """docker-compose / podman-compose: the standalone spelling of `docker compose`."""
    words = (Word.literal("docker"), Word.literal("compose"), *cmd.words[1:])
    yield from containers(Command(words, cmd.redirects, cmd.stdin), ctx)


def containers(cmd: Command, ctx: Context) -> Iterator[Hit]:
    sub, rest = first_operand(
        cmd.words[1:],
        "Hcl",
        ("--host", "--context", "--config", "--log-level", "--url", "--connection"),
    )
    texts = [w.text for w in rest]
    line = f"{cmd.name} {sub} {shown(texts)}".strip()
    objects = {"system", "volume", "image", "container", "network", "builder", "buildx", "pod"}
    if sub in ("rm", "rmi", "stop", "kill", "prune"):
        yield Hit("ask", f"{line} removes or stops containers")
    elif sub in objects and texts[:1] and texts[0] in ("prune", "rm", "remove", "stop", "kill"):
        yield Hit("ask", f"{line} removes containers or their data")
    elif sub == "compose" and {"down", "rm", "kill", "stop"} & set(texts):
        volumes = any(t in ("-v", "--volumes") or re.fullmatch(r"-\w*v\w*", t) for t in texts)
        extra = " and deletes their volumes (data)" if volumes else ""
        yield Hit("ask", f"{line} stops and removes containers{extra}")
    elif sub in ("run", "create") and _host_access(texts):
        yield Hit("ask", f"{line} gives a container access to the host")


def _host_access(texts: list[str]) -> bool:
    for i, text in enumerate(texts):
        if text in (
            "--privileged",
            "--pid=host",
            "--net=host",
            "--network=host",
            "--userns=host",
            "--cap-add=ALL",
            "--cap-add=SYS_ADMIN",
        ):
            return True
        volume = (
            text.split("=", 1)[1]
            if text.startswith(("--volume=", "--mount="))
            else (texts[i + 1] if text in ("-v", "--volume") and i + 1 < len(texts) else "")
        )
        if re.match(
            r"(source=|src=)?/(etc|root|var/run/docker\.sock|run/docker\.sock)?(:|,|$)", volume
        ):
            return True
    return False


def git(cmd: Command, ctx: Context) -> Iterator[Hit]:
    sub, rest = first_operand(
        cmd.words[1:],
        "Cc",
        ("--git-dir", "--work-tree", "--namespace", "--exec-path", "--config-env"),
    )
    flags = parse_flags(rest, "omCSX", ("--repo", "--receive-pack", "--exec", "--push-option"))
    ops = [w.text for w in flags.operands]
    check = _GIT.get(sub)
    reason = check(flags, ops) if check else None
    if reason:
        yield Hit("ask", reason)


def _git_push(flags: Flags, ops: list[str]) -> str | None:
    if flags.has("-n", "--dry-run"):
        return None  # only reports what would be pushed
    if flags.has("-f", "--force", "--force-with-lease", "--force-if-includes"):
        return "git push --force rewrites history on the remote"
    if any(op.startswith("+") for op in ops[1:]):
        return "git push +refspec force-pushes, rewriting history on the remote"
    if flags.has("-d", "--delete", "--mirror", "--prune") or any(
        op.startswith(":") for op in ops[1:]
    ):
        return "git push deletes remote branches or refs"
    return None


_GIT: dict[str, Callable[[Flags, list[str]], str | None]] = {
    "push": _git_push,
    "reset": lambda f, ops: (
        "git reset --hard discards uncommitted changes" if f.has("--hard") else None
    ),
    "clean": lambda f, ops: (
        "git clean -f deletes untracked files"
        if f.has("-f", "--force") and not f.has("-n", "--dry-run")
        else None
    ),
    "branch": lambda f, ops: (
        "git branch -D deletes a branch that may not be merged"
        if f.has("-D") or (f.has("-d", "--delete") and f.has("-f", "--force"))
        else None
    ),
    "checkout": lambda f, ops: (
        "git checkout discards local changes"
        if f.has("-f", "--force") or (ops and set(ops) <= {".", ":/", "*"})
        else None
    ),
    "restore": lambda f, ops: (
        "git restore discards local changes"
        if set(ops) & {".", ":/", "*"}
        and not (f.has("-S", "--staged") and not f.has("-W", "--worktree"))
        else None
    ),
    "stash": lambda f, ops: (
        "git stash drop/clear deletes stashed changes" if ops[:1] in (["drop"], ["clear"]) else None
    ),
    "reflog": lambda f, ops: (
        "git reflog expire removes recovery points" if ops[:1] in (["expire"], ["delete"]) else None
    ),
    "gc": lambda f, ops: (
        "git gc --prune=now removes unreachable commits for good"
        if any(v in ("now", "all") for v in f.value("--prune"))
        else None
    ),
    "filter-branch": lambda f, ops: "git filter-branch rewrites history",
    "filter-repo": lambda f, ops: "git filter-repo rewrites history",
    "update-ref": lambda f, ops: "git update-ref -d deletes a ref" if f.has("-d") else None,
}


def crontab(cmd: Command, ctx: Context) -> Iterator[Hit]:
    flags = parse_flags(cmd.words[1:], "u", ())
    if flags.has("-r"):
        yield Hit("ask", "crontab -r removes the crontab")
    elif flags.has("-e") or flags.operands or "-" in cmd.args:
        yield Hit("ask", "replaces or edits the crontab")


def accounts(cmd: Command, ctx: Context) -> Iterator[Hit]:
    yield Hit("ask", f"{cmd.name} changes user accounts or passwords")


def firewall(cmd: Command, ctx: Context) -> Iterator[Hit]:
    args = cmd.args
    ufw = cmd.name == "ufw" and args[:1] in (("disable",), ("reset",))
    nft = cmd.name == "nft" and ("flush" in args or "delete" in args)
    tables = cmd.name.endswith("tables") and any(
        re.fullmatch(r"-[FXP]\w*|--flush|--delete-chain|--policy", a) for a in args
    )
    if ufw or nft or tables:
        yield Hit("ask", f"{cmd.name} {shown(args)} changes the firewall")


def system_state(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Kernel modules, mounts, SELinux, sysctl writes: the machine changes under everyone."""
    args = cmd.args
    if cmd.name == "sysctl" and not any(
        a in ("-w", "--write", "-p", "--load") or "=" in a for a in args
    ):
        return
    if cmd.name in ("mount", "swapon") and (not args or args == ("-l",)):
        return
    if cmd.name == "modprobe" and not any(a in ("-r", "--remove") for a in args):
        return
    yield Hit("ask", f"{cmd.name} {shown(args)} changes the running system".replace("  ", " "))


_STORAGE: dict[str, re.Pattern[str]] = {
    "cryptsetup": re.compile(r"luksFormat|erase|luksErase|luksKillSlot|luksRemoveKey|reencrypt"),
    "zpool": re.compile(r"destroy|labelclear|remove"),
    "zfs": re.compile(r"destroy|rollback"),
    "lvremove": re.compile(""),
    "vgremove": re.compile(""),
    "pvremove": re.compile(""),
    "mdadm": re.compile(r"--zero-superblock|--stop|--remove"),
    "nvme": re.compile(r"format|sanitize"),
    "hdparm": re.compile(r"--security-erase|--trim-sector-ranges|--make-bad-sector|--dco-restore"),
    "btrfs": re.compile(r"delete|device remove|\brescue\b"),
}


def storage(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Volume, pool and encryption tools whose removal or format destroys data."""
    line = " ".join(cmd.args)
    if _STORAGE[cmd.name].search(line):
        yield Hit("ask", f"{cmd.name} {shown(cmd.args)} destroys or detaches storage")


def network(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Taking an interface down can cut off the machine, and this gateway with it."""
    args = cmd.args
    if re.search(r"\b(down|disconnect|off)\b", " ".join(args)) or cmd.name in ("ifdown",):
        yield Hit("ask", f"{cmd.name} {shown(args)} takes a network interface down")


RULES: dict[str, Rule] = {
    **dict.fromkeys(_STORAGE, storage),
    **dict.fromkeys(("ip", "ifconfig", "ifdown", "nmcli", "networkctl"), network),
    **dict.fromkeys(("shutdown", "reboot", "halt", "poweroff", "kexec"), power),
    "init": init,
    "telinit": init,
    "systemctl": systemctl,
    "loginctl": systemctl,
    "service": service,
    "kill": kill,
    **dict.fromkeys(("pkill", "killall", "killall5", "skill", "slay"), kill_by_name),
    **dict.fromkeys(("docker", "podman", "nerdctl"), containers),
    **dict.fromkeys(("docker-compose", "podman-compose"), compose),
    "git": git,
    "crontab": crontab,
    **dict.fromkeys(
        (
            "userdel",
            "deluser",
            "groupdel",
            "delgroup",
            "passwd",
            "chpasswd",
            "usermod",
            "visudo",
            "chage",
        ),
        accounts,
    ),
    **dict.fromkeys(("ufw", "nft", "iptables", "ip6tables", "iptables-legacy"), firewall),
    **dict.fromkeys(
        (
            "insmod",
            "rmmod",
            "modprobe",
            "mount",
            "umount",
            "swapoff",
            "swapon",
            "setenforce",
            "sysctl",
        ),
        system_state,
    ),
    **dict.fromkeys(PACKAGE_MANAGERS, packages),
}
INTERPRETER_RULES: list[Rule] = [packages]  # python -m pip uninstall
