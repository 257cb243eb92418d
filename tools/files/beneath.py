"""Race-free path resolution beneath a directory file descriptor.

Each component is opened relative to the directory before it with `O_NOFOLLOW`, and symlinks
are expanded here rather than by the kernel, so a symlink or rename swapped in by a concurrent
process (the shell) can never carry an open outside the base. Where the kernel has `openat2`,
a path without symlinks is opened in one call with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, TypeVar

T = TypeVar("T")

MAX_LINKS = 40  # symlinks expanded in one resolution, as the kernel's own limit
# Looks again at a name that stopped being a symlink between the open and the readlink. Only a
# process renaming that name over and over loses the race this often.
MAX_RETRIES = 1000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK

Reason = Literal["outside", "missing", "not_dir", "loop", "link", "changing"]


class Refused(Exception):
    """The path cannot be resolved beneath the base; `reason` says why."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason)
        self.reason: Reason = reason


class _Link(Exception):
    """The final component is a symlink (raised by a final step, handled by `resolve_last`)."""


class Cursor:
    """A position under the base: the directory fds walked so far and the components left.

    Keeping the fds of every ancestor lets `..` return to the directory actually walked
    through (not whatever is at that path now), and stops at the base.
    """

    def __init__(self, base_fd: int, base_path: PurePosixPath, parts: Iterable[str]) -> None:
        self._base_path = base_path
        self._fds = [os.dup(base_fd)]
        self._names: list[str] = []
        self._pending = deque(parts)
        self._links = 0
        self._retries = 0

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()

    @property
    def dir_fd(self) -> int:
        return self._fds[-1]

    @property
    def parts(self) -> tuple[str, ...]:
        """The directory reached, relative to the base (symlinks already expanded)."""
        return tuple(self._names)

    def to_last(self, *, create_dirs: bool = False, dir_mode: int = 0o777) -> str:
        """Walk every component but the last and return the last ("" when the path ends at a
        directory already walked, as with "." or "a/..")."""
        while self._pending:
            name = self._pending.popleft()
            if name in ("", "."):
                continue
            if name == "..":
                if len(self._fds) == 1:
                    raise Refused("outside")
                os.close(self._fds.pop())
                self._names.pop()
                continue
            if not self._pending:
                return name
            self._descend(name, create_dirs, dir_mode)
        return ""

    def follow(self, name: str) -> None:
        """`name` in the current directory is a symlink: continue with its target instead."""
        try:
            target = os.readlink(name, dir_fd=self.dir_fd)
        except FileNotFoundError:
            raise Refused("missing") from None
        except OSError:
            # No longer a link (swapped back meanwhile): look at the name again. That is a lost
            # race, not a symlink expanded, so it does not count towards the loop limit.
            self._retries += 1
            if self._retries > MAX_RETRIES:
                raise Refused("changing") from None
            self._pending.appendleft(name)
            return
        self._links += 1
        if self._links > MAX_LINKS:
            raise Refused("loop")
        rest = list(self._pending)
        if target.startswith("/"):
            inside = PurePosixPath(target)
            if inside.parts[: len(self._base_path.parts)] != self._base_path.parts:
                raise Refused("outside")
            while len(self._fds) > 1:
                os.close(self._fds.pop())
            self._names.clear()
            ahead = list(inside.parts[len(self._base_path.parts) :])
        else:
            ahead = target.split("/")
        self._pending = deque([*ahead, *rest])

    def _descend(self, name: str, create: bool, dir_mode: int) -> None:
        while True:
            try:
                fd = os.open(name, _DIR_FLAGS, dir_fd=self.dir_fd)
            except FileNotFoundError:
                if not create:
                    raise Refused("missing") from None
                with suppress(FileExistsError):  # made meanwhile: the open decides what it is
                    os.mkdir(name, dir_mode, dir_fd=self.dir_fd)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise
                kind = _kind(self.dir_fd, name)
                if kind == "missing":
                    raise Refused("missing") from None
                if kind == "other":
                    raise Refused("not_dir") from None
                # A symlink (or one swapped back to a directory since the open): continue with
                # its target, or look at the name again.
                self.follow(name)
                return
            self._fds.append(fd)
            self._names.append(name)
            return


def resolve_last(
    cursor: Cursor,
    step: Callable[[int, str], T],
    *,
    follow_last: bool,
    create_dirs: bool = False,
    dir_mode: int = 0o777,
) -> tuple[T, tuple[str, ...]]:
    """Walk to the last component and run `step(dir_fd, name)` on it; when the step finds a
    symlink there, follow it (staying beneath the base) or refuse with reason "link".

    Returns the step's result and the path it ran on, relative to the base.
    """
    while True:
        name = cursor.to_last(create_dirs=create_dirs, dir_mode=dir_mode)
        try:
            result = step(cursor.dir_fd, name or ".")
            return result, (*cursor.parts, *([name] if name else []))
        except _Link:
            if not follow_last:
                raise Refused("link") from None
            cursor.follow(name)


def open_beneath(
    base_fd: int,
    base_path: PurePosixPath,
    parts: list[str],
    flags: int,
    mode: int = 0o666,
    *,
    follow_last: bool = True,
    create_dirs: bool = False,
) -> tuple[int, tuple[str, ...]]:
    """Open `parts` beneath `base_fd`; return the fd and its path relative to the base."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC
    fast = _openat2(base_fd, parts, flags, mode)
    if fast is not None:
        return fast

    def step(dir_fd: int, name: str) -> int:
        try:
            return os.open(name, flags, mode, dir_fd=dir_fd)
        except OSError as exc:
            # With O_NOFOLLOW, ELOOP means a symlink was there at the open (even if it has been
            # swapped since: following it then just looks at the name again).
            if exc.errno == errno.ELOOP or (
                exc.errno == errno.ENOTDIR and _kind(dir_fd, name) == "link"
            ):
                raise _Link from None
            raise

    with Cursor(base_fd, base_path, parts) as cursor:
        return resolve_last(cursor, step, follow_last=follow_last, create_dirs=create_dirs)


def stat_beneath(
    base_fd: int, base_path: PurePosixPath, parts: list[str]
) -> tuple[os.stat_result, tuple[str, ...]]:
    """lstat `parts` beneath the base (following symlinks that stay beneath it)."""

    def step(dir_fd: int, name: str) -> os.stat_result:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise _Link
        return info

    with Cursor(base_fd, base_path, parts) as cursor:
        try:
            return resolve_last(cursor, step, follow_last=True)
        except FileNotFoundError:
            raise Refused("missing") from None


_HERE = PurePosixPath()


@dataclass(frozen=True)
class Entry:
    """One non-directory entry met by `walk_fd`: its directory (open only while the walk is
    at it), its name, and its path relative to where the walk started."""

    dir_fd: int
    name: str
    rel: PurePosixPath
    is_symlink: bool


def tree_usage(dir_fd: int) -> tuple[int, int]:
    """Files (everything but directories; symlinks count, their targets do not) and bytes of
    the regular files under `dir_fd`."""
    files = size = 0
    for entry in walk_fd(dir_fd, lambda _name: False):
        try:
            info = os.stat(entry.name, dir_fd=entry.dir_fd, follow_symlinks=False)
        except OSError:
            continue  # removed since the listing
        files += 1
        size += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return files, size


def walk_fd(
    dir_fd: int, prune: Callable[[str], bool], rel: PurePosixPath = _HERE
) -> Iterator[Entry]:
    """Every non-directory entry under `dir_fd`, names sorted, depth first, never entering a
    symlinked directory (each directory is opened with O_NOFOLLOW relative to its parent)."""
    try:
        with os.scandir(dir_fd) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError:
        return
    subdirs: list[str] = []
    for entry in entries:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_link = entry.is_symlink()
        except OSError:
            continue
        if is_dir:
            if not prune(entry.name):
                subdirs.append(entry.name)
        else:
            yield Entry(dir_fd, entry.name, rel / entry.name, is_link)
    for name in subdirs:
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except OSError:
            continue  # gone or swapped for a link since the listing
        try:
            yield from walk_fd(child, prune, rel / name)
        finally:
            os.close(child)


def remove_tree(dir_fd: int, name: str) -> tuple[int, int]:
    """Delete `name` in `dir_fd` and, when it is a directory, everything under it, without
    following a symlink (a link is removed, never its target); returns (non-directories
    removed, bytes of regular files freed)."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        os.unlink(name, dir_fd=dir_fd)
        return 1, info.st_size if stat.S_ISREG(info.st_mode) else 0
    files = size = 0
    try:
        with os.scandir(fd) as listing:
            names = [entry.name for entry in listing]
        for child in names:
            child_files, child_size = remove_tree(fd, child)
            files, size = files + child_files, size + child_size
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)
    return files, size


def _kind(dir_fd: int, name: str) -> Literal["link", "dir", "other", "missing"]:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return "missing"
    if stat.S_ISLNK(mode):
        return "link"
    return "dir" if stat.S_ISDIR(mode) else "other"


# -- openat2 fast path ---------------------------------------------------------------------------

_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added after the unification)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
# Errors after which the walk runs instead: it follows links that stay inside, creates missing
# directories and says precisely what was wrong.
_FALL_BACK = {errno.ELOOP, errno.EXDEV, errno.EAGAIN, errno.ENOENT, errno.ENOTDIR}


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_syscall() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    return fn


_syscall = _load_syscall()
USE_OPENAT2 = _syscall is not None  # turned off for good once the kernel says it has none


def _openat2(
    base_fd: int, parts: list[str], flags: int, mode: int
) -> tuple[int, tuple[str, ...]] | None:
    global USE_OPENAT2
    if not USE_OPENAT2 or _syscall is None or not parts:
        return None
    how = _OpenHow(
        flags,
        mode if flags & os.O_CREAT else 0,
        _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS,
    )
    path = os.fsencode("/".join(parts))
    fd = _syscall(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(base_fd),
        ctypes.c_char_p(path),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        # No symlink was followed and nothing left the base, so the lexical path is the real one.
        return fd, _normalise(parts)
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM, errno.E2BIG):  # no openat2, or seccomp forbids it
        USE_OPENAT2 = False
        return None
    if code in _FALL_BACK or code == errno.EINVAL:
        return None
    raise OSError(code, os.strerror(code), "/".join(parts))


def _normalise(parts: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            out.pop()  # openat2 refused any ".." above the base, so there is one to pop
        elif part not in ("", "."):
            out.append(part)
    return tuple(out)
