"""Process-level hardening of the gateway itself, called once at startup."""

from __future__ import annotations

import ctypes
import logging
import sys

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def make_non_dumpable() -> bool:
    """Mark this process non-dumpable, so a command running as the same user cannot read its
    /proc/<pid>/environ, memory, open files or maps (where the tokens and the LLM key live).

    Root (any process with CAP_SYS_PTRACE) can still read them: a root gateway needs the
    commands to run as an unprivileged user as well. Returns whether the flag is set.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            log.warning("could not mark the gateway non-dumpable errno=%d", ctypes.get_errno())
            return False
        return bool(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
    except OSError:
        log.warning("could not mark the gateway non-dumpable: no libc")
        return False
