"""What a pipeline stage prints, when that is fixed before it runs (echo, printf, decoders),
so that `echo cm0gLXJmIC8= | base64 -d | sh` is judged by what the shell would run."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from functools import partial

from tools.shell.safety.model import Command

_MAX_TEXT = 100_000
_ESCAPE = re.compile(r"\\(0[0-7]{0,3}|[0-7]{1,3}|x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|.)", re.S)
_SIMPLE = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "e": "\x1b",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
_FORMAT = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)([sbdiouxXcfeEgGq%])")


def static_output(cmd: Command) -> str | None:
    """The exact standard output of `cmd` if it is knowable statically, else None."""
    if not cmd.words or any(w.dynamic for w in cmd.words):
        return None
    name, args = cmd.name, list(cmd.args)
    if name == "echo":
        return _echo(args)
    if name == "printf":
        return _printf(args)
    data = cmd.stdin.text
    if data is None or len(data) > _MAX_TEXT:
        return None
    files = [a for a in args if not a.startswith("-")]
    if name in ("cat", "tee") and (name == "tee" or not files or files == ["-"]):
        return data
    if files and name != "openssl":
        return None
    return _decode(name, args, data)


def _decode(name: str, args: list[str], data: str) -> str | None:
    decoding = any(
        a in ("-d", "--decode", "-D")
        or (a.startswith("-") and "d" in a[1:] and not a.startswith("--"))
        for a in args
    )
    if name in ("base64", "basenc") and decoding:
        return _b64(data)
    if (
        name == "openssl"
        and "-d" in args
        and ("base64" in args or "-a" in args or "-base64" in args)
    ):
        return _b64(data)
    if name == "base32" and decoding:
        return _text(lambda: base64.b32decode(_pad("".join(data.split()), 8)))
    if name == "xxd" and any(a.startswith("-r") for a in args):
        return _text(lambda: binascii.unhexlify("".join(re.findall(r"[0-9a-fA-F]{2}", data))))
    if name == "rev":
        return "\n".join(line[::-1] for line in data.split("\n"))
    return None


def _b64(data: str) -> str | None:
    compact = "".join(data.split())
    return _text(
        lambda: base64.b64decode(
            _pad(compact, 4), altchars=b"-_" if "-" in compact or "_" in compact else None
        )
    )


def _pad(text: str, block: int) -> str:
    return text + "=" * (-len(text) % block)


def _text(produce: Callable[[], bytes]) -> str | None:
    try:
        return produce().decode("utf-8")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None


def _echo(args: list[str]) -> str:
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        newline = newline and "n" not in args[0]
        escapes = "e" in args[0] or (escapes and "E" not in args[0])
        args = args[1:]
    text = " ".join(args)
    return (unescape(text) if escapes else text) + ("\n" if newline else "")


def _printf(args: list[str]) -> str | None:
    if not args or args[0] == "-v":
        return None
    if args[0] == "--":
        args = args[1:]
    if not args:
        return None
    fmt, values = args[0], args[1:]
    out: list[str] = []
    # printf reuses the format until the arguments run out.
    for _ in range(len(values) + 1):
        rest = iter(values)
        out.append(_FORMAT.sub(partial(_field, values=rest), unescape(fmt)))
        used = len(_FORMAT.findall(fmt)) - fmt.count("%%")
        values = values[used:] if used else []
        if not values:
            break
    return "".join(out)


def _field(m: re.Match[str], values: Iterator[str]) -> str:
    if m.group(2) == "%":
        return "%"
    value = next(values, "")
    return unescape(value) if m.group(2) == "b" else str(value)


def unescape(text: str) -> str:
    """Backslash escapes as printf and echo -e read them."""

    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        if body[0] == "x":
            return chr(int(body[1:], 16))
        if body[0] == "u":
            return chr(int(body[1:], 16))
        if body[0] in "01234567":
            return chr(int(body.lstrip("0") or "0", 8) & 0xFF)
        return _SIMPLE.get(body, "\\" + body)

    return _ESCAPE.sub(one, text)
