"""Rules for commands that delete, overwrite or re-permission files and disks."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tools.shell.safety.argv import parse_flags
from tools.shell.safety.context import Context, Rule, shown
from tools.shell.safety.model import Command, Hit, Word
from tools.shell.safety.paths import HOME, Place, block_device, protected, write_risk
from tools.shell.safety.runners import find_starts
from tools.shell.safety.shape import show_path

_DASH_MODE = re.compile(r"[-+=][rwxXst]+([,+=-][rwxXstugoa]*)*")
_DELETERS = frozenset({"rm", "shred", "unlink", "rmdir", "wipefs", "truncate"})
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_PARTITIONERS = frozenset({"fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted", "partx"})


def _protected_hits(words: list[Word], ctx: Context, verb: str) -> Iterator[Hit]:
    for word in words:
        for place in ctx.scope.locate(word):
            why = protected(place.path)
            if why is None:
                continue
            if why.split(" ")[0] == word.text:
                yield Hit("block", f"{verb} {why}")
            else:
                yield Hit("block", f"{verb} {word.text}, which is {why}")
            return


def gateway_hits(
    words: list[Word], ctx: Context, verb: str, *, tree: bool = False
) -> Iterator[Hit]:
    """Asks for touching the gateway's own files (config, store, skills, data directory);
    `tree`: the command works recursively, so a protected place under a word counts too."""
    for word in words:
        for place in ctx.scope.locate(word):
            guarded = ctx.state.owner(place.path) or (
                ctx.state.inside(place.path) if tree else None
            )
            if guarded is not None:
                yield Hit("ask", f"{verb} {word.text}, which holds {guarded.label}")
                return


def _outside(words: list[Word], ctx: Context) -> Word | None:
    for word in words:
        if any(place.outside for place in ctx.scope.locate(word)):
            return word
    return None


def rm(cmd: Command, ctx: Context) -> Iterator[Hit]:
    flags = parse_flags(cmd.words[1:])
    recursive = flags.has("-r", "-R", "--recursive")
    ops = flags.operands
    what = shown(w.text for w in ops) or "paths read from input"
    yield from gateway_hits(ops, ctx, "deletes", tree=recursive)
    if recursive:
        yield from _protected_hits(ops, ctx, "recursive delete of")
        yield Hit("ask", f"recursive delete of {what}")
    elif flags.has("-f", "--force"):
        yield Hit("ask", f"forced delete of {what}")
    elif dynamic := next((w for w in ops if w.dynamic), None):
        yield Hit("ask", f"deletes a path only known at run time ({dynamic.text})")
    elif outside := _outside(ops, ctx):
        yield Hit("ask", f"deletes {outside.text}, outside the workspace")


def find(cmd: Command, ctx: Context) -> Iterator[Hit]:
    args = cmd.args
    runs = [args[i + 1] for i, a in enumerate(args[:-1]) if a in _FIND_RUNS]
    runs_delete = any(r.rsplit("/", 1)[-1] in _DELETERS for r in runs)
    starts, _ = find_starts(cmd.words[1:])
    if runs or "-delete" in args or "-fprint" in args:
        # A command run on every file of a home or system tree is a sweep, whatever it is.
        wide = next((w for w in starts if _wide(w, ctx)), None)
        if wide is not None:
            what = f"runs {runs[0]} on" if runs else "deletes or writes"
            yield Hit("ask", f"find {what} every file under {wide.text}")
        yield from gateway_hits(starts, ctx, "find works through", tree=True)
    if "-delete" not in args and not runs_delete:
        return
    yield from _protected_hits(starts, ctx, "find deleting under")
    yield Hit("ask", f"find deletes every match under {shown(w.text for w in starts)}")


def _wide(word: Word, ctx: Context) -> bool:
    """A home directory, / or a system directory: far more than the task at hand."""
    for place in ctx.scope.locate(word):
        path = place.path
        home = ctx.state.in_home(path) and len([c for c in path.split("/") if c]) <= 2
        if home or protected(path) is not None or path == "/":
            return True
    return False


def unlink(cmd: Command, ctx: Context) -> Iterator[Hit]:
    ops = parse_flags(cmd.words[1:]).operands
    yield from gateway_hits(ops, ctx, "deletes")
    if dynamic := next((w for w in ops if w.dynamic), None):
        yield Hit("ask", f"deletes a path only known at run time ({dynamic.text})")
    elif outside := _outside(ops, ctx):
        yield Hit("ask", f"deletes {outside.text}, outside the workspace")


def rsync(cmd: Command, ctx: Context) -> Iterator[Hit]:
    flags = parse_flags(cmd.words[1:], "eTfB", ("--rsh", "--exclude", "--include", "--filter"))
    if not any(
        name.startswith("--delete") or name == "--remove-source-files" for name in flags.long
    ):
        return
    dest = flags.operands[-1:]
    yield from gateway_hits(dest, ctx, "rsync deletes files in", tree=True)
    yield from _protected_hits(dest, ctx, "rsync --delete into")
    yield Hit("ask", f"rsync deletes files in {shown(w.text for w in dest)}")


def chmod_family(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """chmod/chown/chgrp: recursive or world-writable changes need a person."""
    words = list(cmd.words[1:])
    dash_modes = [w for w in words if cmd.name == "chmod" and _DASH_MODE.fullmatch(w.text)]
    flags = parse_flags([w for w in words if w not in dash_modes], long_args=("--reference",))
    ops = flags.operands
    referenced = bool(flags.value("--reference"))
    mode = dash_modes[0].text if dash_modes else (ops[0].text if ops and not referenced else "")
    targets = ops if dash_modes or referenced else ops[1:]
    what = shown(w.text for w in targets)
    yield from gateway_hits(targets, ctx, f"{cmd.name} of", tree=flags.has("-R", "--recursive"))
    if flags.has("-R", "--recursive"):
        yield from _protected_hits(targets, ctx, f"recursive {cmd.name} of")
        yield Hit("ask", f"recursive {cmd.name} of {what}")
    if cmd.name == "chmod" and _world_writable(mode):
        yield Hit("ask", f"makes {what} writable by everyone (chmod {mode})")
    if cmd.name == "chmod" and _setuid(mode):
        yield Hit("ask", f"sets the setuid/setgid bit on {what} (chmod {mode})")
    if any(protected(p.path) for w in targets for p in ctx.scope.locate(w)):
        yield Hit("ask", f"{cmd.name} of a system directory ({what})")
    elif cmd.name != "chmod" and (outside := _outside(targets, ctx)):
        yield Hit("ask", f"{cmd.name} of {outside.text}, outside the workspace")


def _world_writable(mode: str) -> bool:
    if re.fullmatch(r"[0-7]{1,4}", mode):
        return int(mode[-1]) & 2 == 2
    for clause in mode.split(","):
        m = re.fullmatch(r"([ugoa]*)([-+=])([rwxXst]*)", clause)
        if m and m.group(2) in "+=" and "w" in m.group(3) and re.search("[oa]", m.group(1)):
            return True
    return False


def _setuid(mode: str) -> bool:
    if re.fullmatch(r"[0-7]{4}", mode):
        return int(mode[0]) & 6 != 0
    return bool(re.search(r"[ug]*[+=][rwxX]*s", mode))


def mkfs(cmd: Command, ctx: Context) -> Iterator[Hit]:
    yield Hit("block", f"{cmd.name} creates a new filesystem, erasing what was there")


def mkswap(cmd: Command, ctx: Context) -> Iterator[Hit]:
    if any(block_device(p.path) for w in cmd.words[1:] for p in ctx.scope.locate(w)):
        yield Hit("block", "mkswap on a block device erases it")
    yield Hit("ask", "mkswap overwrites its target")


def truncate(cmd: Command, ctx: Context) -> Iterator[Hit]:
    flags = parse_flags(cmd.words[1:], "sr", ("--size", "--reference"))
    sizes = flags.value("-s", "--size")
    if any(re.fullmatch(r"0+[A-Za-z]*", s) or s[:1] in "-<%/" for s in sizes) or flags.value(
        "-r", "--reference"
    ):
        yield Hit("ask", f"truncate empties or shrinks {shown(w.text for w in flags.operands)}")


def destroy(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """shred, wipefs, blkdiscard: data is gone for good (devices are caught as writes)."""
    ops = [w for w in cmd.words[1:] if not w.text.startswith("-")]
    yield from gateway_hits(ops, ctx, f"{cmd.name} destroys")
    yield Hit("ask", f"{cmd.name} destroys the data in {shown(w.text for w in ops)}")


def partition(cmd: Command, ctx: Context) -> Iterator[Hit]:
    args = cmd.args
    if any(a in ("-l", "--list", "-p", "--print", "print", "-s", "--show") for a in args):
        return
    yield Hit("ask", f"{cmd.name} edits a partition table")


def mv(cmd: Command, ctx: Context) -> Iterator[Hit]:
    flags = parse_flags(cmd.words[1:], "tS", ("--target-directory", "--suffix"))
    targets = flags.value("-t", "--target-directory")
    ops = flags.operands
    dests = [Word.literal(t) for t in targets] or ops[-1:]
    sources = ops if targets else ops[:-1]
    for hit in _protected_hits(dests, ctx, "moves files onto"):
        yield Hit("ask", hit.reason)
    for hit in _protected_hits(sources, ctx, "moves"):
        yield Hit("ask", hit.reason)
    yield from gateway_hits(sources, ctx, "moves", tree=True)


def write_targets(cmd: Command) -> list[Word]:
    """Every path the command will write: redirects plus the command's own outputs."""
    targets = [r.target for r in cmd.redirects if r.writes and r.target is not None]
    words = list(cmd.words[1:])
    name = cmd.name
    if name == "tee":
        targets += parse_flags(words).operands
    elif name in ("cp", "mv", "install", "ln", "rsync", "scp"):
        flags = parse_flags(
            words,
            "tSmogPicFlJe",
            (
                "--target-directory",
                "--suffix",
                "--mode",
                "--owner",
                "--group",
                "--rsh",
                "--exclude",
            ),
        )
        dirs = [Word.literal(d) for d in flags.value("-t", "--target-directory")]
        last = flags.operands[-1:] if len(flags.operands) >= 2 else []
        # host:path destinations are on another machine
        targets += dirs or [w for w in last if not re.match(r"[^/]*:", w.text)]
    elif name == "sed":
        targets += _sed_files(words)
    elif name == "dd":
        targets += [Word.literal(w.text[3:]) for w in words if w.text.startswith("of=")]
    elif name in ("curl", "wget", "wget2"):
        flags = parse_flags(
            words, "oOPdHXAeuU", ("--output", "--output-document", "--directory-prefix")
        )
        outs = flags.value("-o", "--output", "--directory-prefix", "-P")
        outs += flags.value("-O", "--output-document") if name != "curl" else []
        targets += [Word.literal(o) for o in outs if o != "-"]
    elif name in ("tar", "unzip", "bsdtar"):
        flags = parse_flags(words, "Cdf" if name != "unzip" else "dx", ("--directory",))
        targets += [
            Word.literal(d)
            for d in flags.value("-C", "--directory")
            + (flags.value("-d") if name == "unzip" else [])
        ]
    elif name in ("truncate", "shred", "wipefs", "blkdiscard", "fallocate", "mkswap", "badblocks"):
        targets += parse_flags(words, "snlo", ("--size", "--length", "--offset")).operands
    elif name == "git" and [w.text for w in words[:1]] == ["clone"]:
        ops = parse_flags(words[1:], "obcuj", ("--branch", "--origin", "--depth")).operands
        targets += ops[1:2]
    return targets


def _sed_files(words: list[Word]) -> list[Word]:
    flags = parse_flags(words, "efl", ("--expression", "--file", "--line-length"))
    if not (flags.has("-i", "--in-place") or any(n.startswith("--in-place") for n in flags.long)):
        return []
    scripted = flags.value("-e", "--expression", "-f", "--file")
    return flags.operands if scripted else flags.operands[1:]


def writes(cmd: Command, ctx: Context) -> Iterator[Hit]:
    targets = write_targets(cmd)
    yield from gateway_hits(targets, ctx, "writes to")
    for target in targets:
        for place in ctx.scope.locate(target):
            risk = write_risk(place)
            if risk is not None and not _rc_in_workspace(place, ctx, risk[1]):
                yield Hit("block" if risk[0] == "block" else "ask", risk[1])
                break
            home = place.outside and ctx.state.in_home(place.path)
            if home and not ctx.state.in_workspace(place.path):
                where = show_path(place.path)
                yield Hit("ask", f"writes outside the workspace into a home directory ({where})")
                break


def _rc_in_workspace(place: Place, ctx: Context, reason: str) -> bool:
    """A `.bashrc` inside the workspace is a project file, not the user's start-up file."""
    return reason.startswith("writes to the shell start-up file") and not (
        place.outside or place.path.startswith(HOME)
    )


RULES: dict[str, Rule] = {
    "rm": rm,
    "find": find,
    "rsync": rsync,
    "chmod": chmod_family,
    "chown": chmod_family,
    "chgrp": chmod_family,
    "mke2fs": mkfs,
    "mkdosfs": mkfs,
    "mkntfs": mkfs,
    "mkexfatfs": mkfs,
    "mformat": mkfs,
    "mkswap": mkswap,
    "truncate": truncate,
    "shred": destroy,
    "wipefs": destroy,
    "blkdiscard": destroy,
    "mv": mv,
    "unlink": unlink,
    **dict.fromkeys(_PARTITIONERS, partition),
}
PREFIX_RULES: dict[str, Rule] = {"mkfs": mkfs}
GENERIC: list[Rule] = [writes]
