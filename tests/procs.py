"""Finding a test's Chromium processes in /proc (Linux): the main process by a marker switch
on its command line, then every descendant, with their memory for the benchmark."""

from __future__ import annotations

import os
import uuid


def marker_switch() -> str:
    """A switch Chromium ignores, added to a test's launch so its processes can be found."""
    return f"--chatgate-test-run={uuid.uuid4().hex}"


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError:  # the process ended meanwhile, or is not ours to read
        return ""


def _parents() -> dict[int, int]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _read(f"/proc/{entry}/stat")
            if stat:
                out[int(entry)] = int(stat.rsplit(") ", 1)[1].split()[1])
    return out


def process_tree(marker: str) -> list[int]:
    """The Chromium main process launched with `marker` and all its descendants."""
    parents = _parents()
    roots = [pid for pid in parents if marker in _read(f"/proc/{pid}/cmdline").split("\0")]
    # The main process is the one whose parent is not itself a marked process.
    tree = [pid for pid in roots if parents.get(pid) not in roots]
    for pid in tree:  # grows while walking: breadth-first over children
        tree.extend(child for child, parent in parents.items() if parent == pid)
    return list(dict.fromkeys(tree))


def alive(pid: int) -> bool:
    stat = _read(f"/proc/{pid}/stat")
    return bool(stat) and stat.rsplit(") ", 1)[1][0] != "Z"


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) in KiB: PSS splits shared pages between the processes sharing them."""
    values = {}
    for line in _read(f"/proc/{pid}/smaps_rollup").splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Pss"):
            values[name] = int(rest.split()[0])
    return values.get("Rss", 0), values.get("Pss", 0)
