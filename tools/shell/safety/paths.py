"""Where a path word points: system roots, home, block devices, files that change how a
machine boots or logs people in. Paths are compared as normalised glob patterns."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from tools.shell.safety.model import Word

# Stands for the invoking user's home, whatever it really is: /home/<user> is a home.
HOME = "/home/~"

# Deleting these or anything directly inside them breaks the machine.
SYSTEM_DIRS = frozenset(
    {
        "etc",
        "usr",
        "bin",
        "sbin",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "boot",
        "var",
        "opt",
        "root",
        "home",
        "dev",
        "proc",
        "sys",
        "srv",
        "Users",
        "System",
        "Library",
        "Applications",
        "private",
    }
)
# Only the directory itself is protected; what is inside is ordinary data.
TOP_ONLY_DIRS = frozenset({"run", "mnt", "media", "snap", "nix", "Volumes", "tmp"})
HOME_PARENTS = frozenset({"home", "Users"})

_BLOCK_DEVICE = re.compile(
    r"/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk|mapper/|dm-|md\d|loop|sr\d|nbd|zram|ram\d|rbd|"
    r"bcache|drbd|mtd|ubi|mem$|kmem$|port$)"
)
_SAMPLE_DEVICES = (
    "/dev/sda",
    "/dev/nvme0n1",
    "/dev/vda",
    "/dev/xvda",
    "/dev/mmcblk0",
    "/dev/disk0",
    "/dev/hda",
    "/dev/mapper/root",
    "/dev/mem",
)
_HARMLESS_DEVICES = re.compile(
    r"/dev/(null|zero|full|stdout|stderr|stdin|tty|random|urandom|"
    r"fd/\d+|shm/.*|pts/.*|tcp/.*|udp/.*)"
)
RC_FILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".zlogin",
        ".bash_login",
        ".bash_logout",
        ".kshrc",
        ".cshrc",
        ".tcshrc",
        ".xprofile",
        ".xinitrc",
        "config.fish",
        "bash.bashrc",
    }
)
# Home dotfiles that hold credentials or start programs: writing them needs a person.
SENSITIVE_HOME = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".kube",
    ".docker",
    ".config/autostart",
    ".config/systemd",
    ".netrc",
    ".gitconfig",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".pgpass",
    ".my.cnf",
)
_GLOB = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Place:
    path: str  # normalised; absolute unless the directory it is relative to is unknown
    outside: bool  # not under the starting directory (the workspace)


UNKNOWN = "<unknown>"  # a directory `cd` went to that cannot be known
_MAX_PINS = 64  # target paths a verdict pins; a command naming more is checked for these


@dataclass(frozen=True)
class Scope:
    """Directories relative paths may be resolved against: the start and every `cd` target."""

    start: str | None = None  # absolute; None when unknown (still "the workspace")
    # cd targets seen in the script: absolute, relative to the start, or UNKNOWN
    others: tuple[str, ...] = ()
    links: bool = False  # paths are on this machine's disk: symbolic links are resolved
    # With `links`: every target path looked at -> where it led (the verdict's pins).
    resolved: dict[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def locate(self, word: Word) -> list[Place]:
        raw = _tilde(word.pattern or word.text)
        if raw.startswith("/"):
            return [Place(_normalise(raw), not self._inside(_normalise(raw)))]
        return [self._relative(raw, base) for base in (self.start, *self.others)]

    def _relative(self, raw: str, base: str | None) -> Place:
        if base == UNKNOWN:
            return Place(posixpath.normpath(raw or "."), True)
        joined = posixpath.join(base, raw) if base else raw
        if joined.startswith("/"):
            path = _normalise(joined)
            return Place(path, not self._inside(path))
        rel = posixpath.normpath(joined or ".")
        return Place(rel, rel == ".." or rel.startswith("../"))

    def _inside(self, path: str) -> bool:
        start = self.start
        return start is not None and (path == start or path.startswith(start.rstrip("/") + "/"))

    def with_cd(self, word: Word | None) -> Scope:
        """The scope after `cd word` may have run somewhere in the script."""
        if word is None:
            targets = [HOME]
        elif word.text == "-" or (word.dynamic and not word.pattern.startswith("/")):
            targets = [UNKNOWN]
        else:
            targets = [place.path for place in self.locate(word)]
        others = list(self.others)
        for target in targets:
            if target not in others and target not in (self.start, "."):
                others.append(target)
        return Scope(self.start, tuple(others[:16]), self.links, self.resolved)

    @property
    def known(self) -> bool:
        """Every directory a relative path may be relative to is known."""
        return UNKNOWN not in self.others

    def real(self, path: str) -> str:
        """Where an absolute path leads through symbolic links, when it differs from the
        path itself ("" otherwise, or when links are not resolved here)."""
        if not self.links or not path.startswith("/") or HOME in path or _GLOB.search(path):
            return ""
        try:
            real = os.path.realpath(path)
        except (OSError, ValueError):
            return "?"
        if len(self.resolved) < _MAX_PINS:
            self.resolved[path] = real
        return real if real != _normalise(path) else ""


def _tilde(raw: str) -> str:
    if raw == "~" or raw.startswith("~/"):
        return HOME + raw[1:]
    if raw.startswith("~"):
        user, _, rest = raw[1:].partition("/")
        home = "/root" if user == "root" else f"/home/{user}"
        return home + ("/" + rest if rest else "")
    return raw


def _normalise(path: str) -> str:
    path = re.sub(r"/+", "/", path)
    return posixpath.normpath(path) if path != "/" else "/"


def _everything(component: str) -> bool:
    """A glob component matching every name in a directory (`*`, `.*`, `*.*`)."""
    return "*" in component and set(component) <= set("*?.")


def protected(path: str) -> str | None:
    """Why deleting `path` (recursively) must never happen, or None."""
    if not path.startswith("/"):
        return None
    parts = [c for c in path.split("/") if c]
    while parts and _everything(parts[-1]):
        parts.pop()
    if not parts:
        return "/" if path == "/" else f"{path} (everything under /)"
    matches = {d for d in SYSTEM_DIRS | TOP_ONLY_DIRS if fnmatchcase(d, parts[0])}
    if not matches:
        return None
    if len(parts) == 1:
        return _describe(path, "system directory" if matches - {"tmp"} else "")
    if len(parts) == 2 and matches & SYSTEM_DIRS:
        if path.startswith(HOME) or matches & HOME_PARENTS:
            return _describe(path, "a home directory")
        return _describe(path, "directly inside a system directory")
    return None


def _describe(path: str, what: str) -> str:
    shown = "~" + path[len(HOME) :] if path.startswith(HOME) else path
    if path.startswith(HOME):
        return f"{shown} (your home directory)"
    return f"{shown} ({what})" if what else shown


def block_device(path: str) -> bool:
    if _BLOCK_DEVICE.match(path):
        return True
    return bool(_GLOB.search(path)) and any(fnmatchcase(dev, path) for dev in _SAMPLE_DEVICES)


def write_risk(place: Place) -> tuple[str, str] | None:
    """("block"|"ask", reason) for writing to this place, or None when ordinary."""
    path = place.path
    if block_device(path):
        return "block", f"writes to the block device {path}"
    if path in ("/proc/sysrq-trigger", "/proc/sys/kernel/sysrq"):
        return "block", f"writes to {path}, which can crash or reboot the machine"
    name = posixpath.basename(path)
    if "/.git/hooks/" in f"/{path}" or re.search(r"(^|/)\.git/config$", path):
        return "ask", f"writes {path}, which makes git run commands later"
    if name in RC_FILES or path.startswith("/etc/profile"):
        return "ask", f"writes to the shell start-up file {path}"
    for sensitive in SENSITIVE_HOME:
        if f"/{sensitive}/" in f"/{path}/":
            return "ask", f"writes into {sensitive} ({path})"
    parts = [c for c in path.split("/") if c] if path.startswith("/") else []
    if not parts or not place.outside:
        return None
    if parts[0] == "dev" and not _HARMLESS_DEVICES.fullmatch(path):
        return "ask", f"writes to the device {path}"
    if parts[0] == "etc":
        return "ask", f"writes into /etc ({path})"
    if path.startswith(("/var/spool/cron", "/var/at")):
        return "ask", f"writes a crontab ({path})"
    if parts[0] in SYSTEM_DIRS - HOME_PARENTS - {"dev", "var"} or path.startswith("/var/lib"):
        return "ask", f"writes into the system directory /{parts[0]} ({path})"
    return None
