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
from dataclasses import dataclass
from pathlib import Path

from asyncinotify import Inotify, Mask

from gateway.sdk import untrusted

log = logging.getLogger(__name__)

_MASK = Mask.OPEN | Mask.ACCESS
_MAX_DIRECTORIES = 512  # watched below the two folders; deeper trees count as read


@dataclass
class OutsideReads:
    """What the watched command read of outside files: the first path found (relative to
    the workspace), or "" when it read none."""

    first: str = ""

    def found(self, rel: str) -> None:
        if not self.first:
            self.first = rel


@contextlib.asynccontextmanager
async def outside_reads(root: Path) -> AsyncIterator[OutsideReads]:
    """Watch `root`'s folders of outside files for the duration of the block; read
    `.first` after it."""
    reads = OutsideReads()
    folders = [root / name for name in untrusted.OUTSIDE_FOLDERS if _real_directory(root / name)]
    if not folders:
        yield reads
        return
    try:
        inotify = Inotify(sync_timeout=0)
    except OSError as exc:
        _assume_read(reads, root, folders, exc)
        yield reads
        return
    with inotify:
        try:
            _watch(inotify, folders)
        except OSError as exc:
            _assume_read(reads, root, folders, exc)
        yield reads
        if not reads.first:
            _collect(inotify, root, reads)


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


def _collect(inotify: Inotify, root: Path, reads: OutsideReads) -> None:
    """Every event the kernel queued while the command ran (the read never waits)."""
    while (event := inotify.sync_get()) is not None:
        if event.mask & Mask.Q_OVERFLOW:
            reads.found(untrusted.OUTSIDE_FOLDERS[0])  # so many reads that the kernel dropped some
            return
        if event.path is not None and event.mask & _MASK and not event.mask & Mask.ISDIR:
            reads.found(_relative(event.path, root))
            return


def _assume_read(reads: OutsideReads, root: Path, folders: list[Path], exc: OSError) -> None:
    for folder in folders:
        if any(folder.iterdir()):
            log.warning("outside folders not watched (%s): %s counts as read", exc, folder.name)
            reads.found(_relative(folder, root))
            return


def _real_directory(path: Path) -> bool:
    with contextlib.suppress(OSError):
        return path.is_dir() and not path.is_symlink()
    return False


def _relative(path: Path, root: Path) -> str:
    with contextlib.suppress(ValueError):
        return path.relative_to(root).as_posix()
    return path.name
