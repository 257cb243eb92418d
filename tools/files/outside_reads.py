"""Which files people sent (attachments/) or the browser downloaded (downloads/) a command
opened while it ran, as the kernel saw it (inotify), not as the command's text says:
`grep -r x .`, `cat *` or a script walking the workspace name no such folder, yet read one.

The folders are on this machine's disk for the sandbox, the local backend and Docker (a bind
mount), and a watch sees opens from inside any of them. Only files count, not listings of
the folders: the gateway itself opens them around a command (handing the workspace over to
the user commands run as). When the watch cannot be set up (the kernel's inotify limits), a
folder with anything in it counts as read: this only ever makes later calls ask.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

from asyncinotify import Inotify, Mask

from gateway.sdk import untrusted

log = logging.getLogger(__name__)

_MASK = Mask.OPEN | Mask.ACCESS
_MAX_DIRECTORIES = 512  # watched below the two folders; deeper trees count as read


class OutsideReads:
    """A watch on a workspace's folders of outside files from its creation until `close`:
    `check()` gives the first file found opened there so far (relative to the workspace),
    or "" when none was."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.first = ""
        self._inotify: Inotify | None = None
        names = untrusted.OUTSIDE_FOLDERS
        folders = [root / name for name in names if _real_directory(root / name)]
        if not folders:
            return
        try:
            self._inotify = Inotify(sync_timeout=0)
            _watch(self._inotify, folders)
        except OSError as exc:
            self.close()
            self._assume_read(folders, exc)

    def check(self) -> str:
        if not self.first and self._inotify is not None:
            self._collect(self._inotify)
        return self.first

    def close(self) -> None:
        if self._inotify is not None:
            self._inotify.close()
            self._inotify = None

    def _found(self, path: Path) -> None:
        if self.first:
            return
        try:
            self.first = path.relative_to(self.root).as_posix()
        except ValueError:
            self.first = path.name

    def _collect(self, inotify: Inotify) -> None:
        """Every event the kernel queued so far (the read never waits)."""
        while (event := inotify.sync_get()) is not None:
            if event.mask & Mask.Q_OVERFLOW:  # so many reads that the kernel dropped some
                self._found(self.root / untrusted.OUTSIDE_FOLDERS[0])
                return
            if event.path is not None and event.mask & _MASK and not event.mask & Mask.ISDIR:
                self._found(event.path)
                return

    def _assume_read(self, folders: list[Path], exc: OSError) -> None:
        for folder in folders:
            if any(folder.iterdir()):
                log.warning("outside folders not watched (%s): %s counts as read", exc, folder.name)
                self._found(folder)
                return


@contextlib.asynccontextmanager
async def outside_reads(root: Path) -> AsyncIterator[OutsideReads]:
    """Watch `root`'s folders of outside files for the duration of the block; read
    `.first` after it."""
    reads = OutsideReads(root)
    try:
        yield reads
        reads.check()
    finally:
        reads.close()


def _watch(inotify: Inotify, folders: list[Path]) -> None:
    # Listed before any watch exists: the listing itself opens every folder.
    directories: list[str] = []
    for folder in folders:
        for directory, _subdirs, _files in os.walk(folder):  # never follows symbolic links
            directories.append(directory)
            if len(directories) > _MAX_DIRECTORIES:
                raise OSError(f"more than {_MAX_DIRECTORIES} folders to watch")
    for directory in directories:
        inotify.add_watch(directory, _MASK)


def _real_directory(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return path.is_dir() and not path.is_symlink()
    return False
