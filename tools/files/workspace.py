"""The workspace jail: every file a tool touches is opened beneath one directory without a race
(tools/files/beneath.py), and regular files with more than one hard link are refused.

`resolve` and `relative` remain for code that needs a path (the shell's working directory);
the file tools use the fd-based operations, which a concurrent symlink or rename cannot fool.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from gateway.sdk import ToolContext, ToolError
from tools.files.beneath import Entry, Refused, open_beneath, stat_beneath, tree_usage, walk_fd

# How tools find the workspace of the conversation a call runs in (tools/files/workspaces.py).
WorkspaceFor = Callable[[ToolContext], "Workspace"]
OpenMode = Literal["read", "edit", "write"]

_FILE_FLAGS = os.O_NONBLOCK | os.O_NOCTTY  # never hang on a FIFO or take a terminal
_MODE_FLAGS: dict[OpenMode, int] = {"read": os.O_RDONLY, "edit": os.O_RDWR, "write": os.O_WRONLY}
SCOPE_DIR_MODE = 0o700


@dataclass
class OpenFile:
    """A regular file with a single link, open inside the workspace."""

    fd: int
    rel: str  # its path relative to the workspace root, symlinks expanded
    size: int
    created: bool = False
    room: int | None = None  # the most it may hold under the workspace's quota (None: no quota)

    def read(self, limit: int) -> bytes:
        """Up to `limit` bytes from the start."""
        chunks, got = [], 0
        while got < limit:
            chunk = os.pread(self.fd, min(limit - got, 1 << 20), got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def replace(self, data: bytes) -> None:
        """Make `data` the whole content (in place, so the file keeps its inode and mode)."""
        if self.room is not None and len(data) > self.room:
            raise ToolError(
                f"{self.rel!r} was not written: {len(data):,} bytes would take the workspace "
                f"past its quota ({max(self.room, 0):,} bytes of room for this file). Delete "
                "files the conversation no longer needs, then try again."
            )
        os.ftruncate(self.fd, 0)
        view, done = memoryview(data), 0
        while done < len(data):
            done += os.pwrite(self.fd, view[done:], done)


@dataclass(frozen=True)
class WalkEntry:
    """A non-directory met by `Workspace.walk`; `under` is relative to the walked directory."""

    entry: Entry
    rel: str
    under: str


class Workspace:
    """One directory the file tools may use: `root`, or `root/<scope...>` for a conversation's
    own workspace (its scope folders are created with mode 0o700 and never followed as links).
    """

    def __init__(self, root: Path, *, scope: tuple[str, ...] = (), quota_bytes: int = 0) -> None:
        self.quota_bytes = quota_bytes  # the most its regular files may hold; 0: no quota
        base = root.expanduser()
        base.mkdir(parents=True, exist_ok=True)
        self._base = base.resolve()
        self._scope = scope
        self.root = self._base.joinpath(*scope)
        self._root_parts = PurePosixPath(self.root)
        if scope:
            os.close(self._open_root())  # create it now: the shell runs in it by path

    # -- paths (for callers that need one, like the shell's cwd) -------------------------------

    def resolve(self, path: str) -> Path:
        """The real path for `path`, refusing anything outside the workspace.

        Symlinks are resolved first, so a link pointing out of the workspace is refused
        just like `../` or an absolute path elsewhere. A path can change after this returns:
        file access goes through the fd-based methods below instead.
        """
        _check_text(path)
        try:
            candidate = Path(path).expanduser()
            if not candidate.is_absolute():
                candidate = self.root / candidate
            real = candidate.resolve()
        except RuntimeError:  # a symlink loop (Python before 3.13), or no home for "~"
            raise ToolError(_MESSAGES["loop"].format(path=path)) from None
        except OSError as exc:  # a loop (3.13), a folder it may not search, a vanishing part
            raise ToolError(_os_error(path, exc)) from None
        if real != self.root and not real.is_relative_to(self.root):
            raise ToolError(_MESSAGES["outside"].format(path=path))
        return real

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path != self.root else "."

    # -- race-free operations -------------------------------------------------------------------

    @contextmanager
    def open_file(self, path: str, mode: OpenMode) -> Iterator[OpenFile]:
        """Open a regular file: "read", "edit" (read and write, must exist) or "write" (created
        with its parent folders when missing). Symlinks that stay inside are followed, except
        on the last component when writing; files with several hard links are refused."""
        self._parts(path)  # a bad path is refused before anything is opened
        flags = _MODE_FLAGS[mode] | _FILE_FLAGS
        with self._root() as root_fd:
            created = False
            try:
                if mode == "write":
                    try:
                        fd, rel = self._open(
                            root_fd, path, flags | os.O_CREAT | os.O_EXCL, follow=False
                        )
                        created = True
                    except FileExistsError:
                        fd, rel = self._open(root_fd, path, flags, follow=False)
                else:
                    fd, rel = self._open(root_fd, path, flags, follow=True)
            except OSError as exc:
                raise ToolError(_os_error(path, exc)) from None
        try:
            info = os.fstat(fd)
            _check_single_file(path, info)
            room = None
            if self.quota_bytes and mode != "read":
                room = self.quota_bytes - (self.used_bytes() - info.st_size)
            yield OpenFile(fd, "/".join(rel) or ".", info.st_size, created, room)
        except OSError as exc:  # reading or writing it: a full disk, an I/O error
            raise ToolError(_os_error(path, exc)) from None
        finally:
            os.close(fd)

    def write_bytes(self, path: str, data: bytes) -> tuple[str, bool]:
        """Create or replace a file; returns its relative path and whether it was created."""
        if self.quota_bytes:  # checked before opening too, so a refused file is not created
            try:
                size = self.stat(path)[1].st_size
            except ToolError:
                size = 0  # a new file (or one the open below refuses, saying why)
            room = self.quota_bytes - (self.used_bytes() - size)
            if len(data) > room:
                raise ToolError(
                    f"{path!r} was not written: {len(data):,} bytes would take the workspace "
                    f"past its quota ({max(room, 0):,} bytes of room for this file). Delete "
                    "files the conversation no longer needs, then try again."
                )
        with self.open_file(path, "write") as file:
            file.replace(data)
            return file.rel, file.created

    def used_bytes(self) -> int:
        """Bytes in the workspace's regular files (symlinks are not followed)."""
        with self._root() as root_fd:
            return tree_usage(root_fd)[1]

    def over_quota(self) -> str | None:
        """One sentence when the workspace holds its quota or more; None otherwise."""
        if not self.quota_bytes:
            return None
        used = self.used_bytes()
        if used < self.quota_bytes:
            return None
        return (
            f"the workspace holds {used:,} bytes, at or past its quota of "
            f"{self.quota_bytes:,} bytes: delete files the conversation no longer needs"
        )

    def stat(self, path: str) -> tuple[str, os.stat_result]:
        """The relative path and stat of `path`, following symlinks that stay inside."""
        parts = self._parts(path)
        with self._root() as root_fd:
            try:
                info, rel = stat_beneath(root_fd, self._root_parts, parts)
            except Refused as refused:
                raise ToolError(_MESSAGES[refused.reason].format(path=path)) from None
            except OSError as exc:
                raise ToolError(_os_error(path, exc)) from None
        return "/".join(rel) or ".", info

    @contextmanager
    def open_dir(self, path: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """An fd of the directory `path` and its relative path; `create` makes it and its
        parents where missing (mkdir -p)."""
        parts = [*self._parts(path), "."] if create else self._parts(path)
        with self._root() as root_fd:
            try:
                fd, rel = self._open(
                    root_fd,
                    path,
                    os.O_RDONLY | os.O_DIRECTORY,
                    follow=True,
                    create_dirs=create,
                    parts=parts,
                )
            except OSError as exc:
                if exc.errno == errno.ENOTDIR:
                    raise ToolError(f"{path!r} is not a directory in the workspace.") from None
                raise ToolError(_os_error(path, exc)) from None
        try:
            yield fd, "/".join(rel) or "."
        finally:
            os.close(fd)

    def listdir(self, path: str) -> list[str]:
        """Names in a directory, sorted, with "/" after subdirectories."""
        with self.open_dir(path) as (fd, _), os.scandir(fd) as listing:
            return sorted(e.name + "/" * e.is_dir(follow_symlinks=False) for e in listing)

    def walk(self, path: str, prune: Callable[[str], bool]) -> Iterator[WalkEntry]:
        """Every non-directory under the directory `path`, sorted, depth first; subdirectories
        for which `prune(name)` is true are skipped and symlinked directories never entered."""
        with self.open_dir(path) as (fd, rel):
            prefix = "" if rel == "." else rel + "/"
            for entry in walk_fd(fd, prune):
                under = entry.rel.as_posix()
                yield WalkEntry(entry, prefix + under, under)

    @contextmanager
    def open_entry(self, item: WalkEntry) -> Iterator[OpenFile]:
        """Open a walked file for reading (a symlink only when its target is inside)."""
        if item.entry.is_symlink:
            with self.open_file(item.rel, "read") as file:
                yield file
            return
        try:
            fd = os.open(
                item.entry.name,
                os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | _FILE_FLAGS,
                dir_fd=item.entry.dir_fd,
            )
        except OSError as exc:
            raise ToolError(_os_error(item.rel, exc)) from None
        try:
            info = os.fstat(fd)
            _check_single_file(item.rel, info)
            yield OpenFile(fd, item.rel, info.st_size)
        finally:
            os.close(fd)

    # -- internals ------------------------------------------------------------------------------

    def _parts(self, path: str) -> list[str]:
        _check_text(path)
        given = PurePosixPath(os.path.expanduser(path))
        parts = list(given.parts)
        if given.is_absolute():
            root = self._root_parts.parts
            if given.parts[: len(root)] != root:
                raise ToolError(_MESSAGES["outside"].format(path=path))
            parts = parts[len(root) :]
        depth = 0
        for part in parts:
            depth += -1 if part == ".." else 1
            if depth < 0:  # climbs above the root whatever exists on the way
                raise ToolError(_MESSAGES["outside"].format(path=path))
        return parts

    def _open(
        self,
        root_fd: int,
        path: str,
        flags: int,
        *,
        follow: bool,
        create_dirs: bool = False,
        parts: list[str] | None = None,
    ) -> tuple[int, tuple[str, ...]]:
        try:
            return open_beneath(
                root_fd,
                self._root_parts,
                self._parts(path) if parts is None else parts,
                flags,
                follow_last=follow,
                create_dirs=create_dirs or bool(flags & os.O_CREAT),
            )
        except Refused as refused:
            raise ToolError(_MESSAGES[refused.reason].format(path=path)) from None

    @contextmanager
    def _root(self) -> Iterator[int]:
        fd = self._open_root()
        try:
            yield fd
        finally:
            os.close(fd)

    def _open_root(self) -> int:
        fd = os.open(self._base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for part in self._scope:
            with suppress(FileExistsError):
                os.mkdir(part, SCOPE_DIR_MODE, dir_fd=fd)
            try:
                child = os.open(
                    part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except OSError:
                os.close(fd)
                raise ToolError(
                    "this conversation's workspace folder is not a plain directory (a link or "
                    "file has taken its place); ask the operator to remove it."
                ) from None
            os.close(fd)
            fd = child
        return fd


_MESSAGES = {
    "outside": "{path!r} is outside the workspace; only paths inside the workspace are allowed "
    "(use a relative path like 'notes/todo.md').",
    "missing": "{path!r} does not exist. Use a path relative to the workspace.",
    "not_dir": "{path!r} does not exist: a part of that path is a file, not a directory.",
    "loop": "{path!r} goes through too many symbolic links; use the real path.",
    "changing": "{path!r} kept changing between a folder and a link while it was opened (a "
    "process is renaming it); try again once that stops.",
    "link": "{path!r} is a symbolic link, and writing through links is refused; write to the "
    "file it points to instead.",
}


def _check_text(path: str) -> None:
    if not path or not path.strip():
        raise ToolError("the path is empty; give a path relative to the workspace.")
    if "\x00" in path:
        raise ToolError("the path contains a NUL byte.")


def _check_single_file(path: str, info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{path!r} is a directory; give a file path.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{path!r} is not a regular file (a device, pipe or socket).")
    if info.st_nlink > 1:
        raise ToolError(
            f"{path!r} has {info.st_nlink} hard links, and hard-linked files are refused "
            "because another link to the same file can sit outside the workspace."
        )


def _os_error(path: str, exc: OSError) -> str:
    if exc.errno == errno.EISDIR:
        return f"{path!r} is a directory; give a file path."
    if exc.errno in (errno.ENXIO, errno.ENODEV):
        return f"{path!r} is not a regular file (a device, pipe or socket)."
    if exc.errno == errno.ENOENT:
        return _MESSAGES["missing"].format(path=path)
    if exc.errno == errno.ELOOP:
        return _MESSAGES["loop"].format(path=path)
    if exc.errno == errno.EACCES or exc.errno == errno.EPERM:
        return f"{path!r} cannot be opened: permission denied."
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"{path!r} was not written: the disk or the workspace's quota is full."
    return f"{path!r} cannot be opened: {exc.strerror or exc}."
