"""A seccomp filter, in the form bubblewrap's `--seccomp FD` loads, that keeps a sandboxed
command from making user namespaces (`unshare -r`, `clone(CLONE_NEWUSER)`).

For the root gateway's sandbox, which has no user namespace of its own where bubblewrap's
`--disable-userns` could apply. `clone3` passes its flags in memory a filter cannot read, so
it fails with ENOSYS and the C library falls back to `clone`.
"""

from __future__ import annotations

import contextlib
import os
import platform
import struct
from collections.abc import Iterator

CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000  # x86-64's x32 numbers: refused outright
# machine -> (AUDIT_ARCH, unshare, clone, clone3)
_SYSCALLS = {
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_ARCH_OFFSET, _NR_OFFSET, _ARG0_OFFSET = 4, 0, 16  # in struct seccomp_data (low word of arg 0)


def no_user_namespaces() -> bytes | None:
    """The filter program (struct sock_filter[]) for this machine; None where unknown."""
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return None
    audit_arch, unshare, clone, clone3 = numbers
    program = [
        (_LD_W_ABS, 0, 0, _ARCH_OFFSET),  # 0
        (_JEQ, 1, 0, audit_arch),  # 1: another ABI (none is expected) -> 2
        (_RET, 0, 0, _ALLOW),  # 2
        (_LD_W_ABS, 0, 0, _NR_OFFSET),  # 3
        (_JGE, 8, 0, _X32_BIT),  # 4 -> 13
        (_JEQ, 6, 0, clone3),  # 5 -> 12
        (_JEQ, 1, 0, unshare),  # 6 -> 8
        (_JEQ, 0, 3, clone),  # 7 -> 8, else 11
        (_LD_W_ABS, 0, 0, _ARG0_OFFSET),  # 8: the flags
        (_JSET, 3, 0, CLONE_NEWUSER),  # 9 -> 13
        (_RET, 0, 0, _ALLOW),  # 10
        (_RET, 0, 0, _ALLOW),  # 11
        (_RET, 0, 0, _ERRNO | _ENOSYS),  # 12
        (_RET, 0, 0, _ERRNO | _EPERM),  # 13
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


@contextlib.contextmanager
def filter_fd(program: bytes | None) -> Iterator[int | None]:
    """A file descriptor holding `program` at offset 0, for bwrap to read; closed after."""
    if program is None:
        yield None
        return
    fd = os.memfd_create("chatgate-seccomp")  # close-on-exec: only bwrap gets it
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)
