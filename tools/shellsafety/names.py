"""Families of command names the checks reason about."""

from __future__ import annotations

import re

SHELLS = frozenset(
    {
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "mksh",
        "ash",
        "yash",
        "fish",
        "csh",
        "tcsh",
        "rbash",
        "posh",
    }
)
INTERPRETERS = frozenset(
    {
        "python",
        "python2",
        "python3",
        "pypy",
        "pypy3",
        "perl",
        "ruby",
        "node",
        "nodejs",
        "php",
        "lua",
        "luajit",
        "tclsh",
        "Rscript",
        "deno",
        "bun",
        "pwsh",
        "powershell",
        "osascript",
        "jshell",
        "groovy",
        "irb",
    }
)
DOWNLOADERS = frozenset(
    {
        "curl",
        "wget",
        "fetch",
        "aria2c",
        "http",
        "https",
        "xh",
        "lwp-request",
        "GET",
        "lynx",
        "links",
        "w3m",
        "nc",
        "ncat",
        "netcat",
        "socat",
        "telnet",
        "ssh",
        "scp",
        "ftp",
        "tftp",
        "wget2",
        "curlie",
    }
)
DECODERS = frozenset(
    {
        "base64",
        "base32",
        "basenc",
        "xxd",
        "openssl",
        "uudecode",
        "gunzip",
        "zcat",
        "gzip",
        "bzcat",
        "bzip2",
        "xzcat",
        "xz",
        "unxz",
        "zstd",
        "zstdcat",
        "rev",
        "tr",
        "od",
        "hexdump",
        "gpg",
    }
)
_VERSIONED = re.compile(r"(python|pypy|perl|ruby|node|php|lua)[0-9.]*")


def is_shell(name: str) -> bool:
    return name in SHELLS


def is_interpreter(name: str) -> bool:
    return name in INTERPRETERS or bool(_VERSIONED.fullmatch(name))


def interpreter_family(name: str) -> str:
    m = _VERSIONED.fullmatch(name)
    return m.group(1) if m else name
