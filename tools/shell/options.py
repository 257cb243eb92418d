"""The options of the programs tools/shell/readonly.py accepts, parsed as the programs parse
them: GNU long options may be shortened to any unambiguous prefix (`sort --comp=sh` is
`--compress-program=sh`), short options cluster (`-uo out`), and an option a program does
not have makes the command not read-only, since no one has checked what it does."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    """One program's options. Long names end in "=" when they take a value (`--key=2` or
    `--key 2`) and in "[=]" when the value is optional and only attached."""

    flags: str = ""  # short options without a value
    valued: str = ""  # short options with a value (attached or the next word)
    longs: str = ""  # space-separated long names
    refused: frozenset[str] = frozenset()  # short letters and long names that write or run
    abbreviations: bool = True  # GNU getopt_long: unique prefixes are accepted
    attached: str = ""  # short options whose value may only be attached (date -Iseconds)

    def long_names(self) -> dict[str, str]:
        """name -> "" (no value), "=" (a value), "[=]" (an optional attached value)."""
        out: dict[str, str] = {}
        for entry in self.longs.split():
            name = entry.removesuffix("[=]").removesuffix("=")
            out[name] = entry[len(name) :]
        return out


def _gnu(flags: str, valued: str, longs: str, *refused: str, attached: str = "") -> Options:
    return Options(flags, valued, longs, frozenset(refused), attached=attached)


_SUMS = (
    "bctwz",
    "",
    "binary check help ignore-missing quiet status strict tag text version warn zero",
)

PROGRAMS: dict[str, Options] = {
    "cat": _gnu(
        "AETbenstuv",
        "",
        "help number number-nonblank show-all show-ends show-nonprinting show-tabs "
        "squeeze-blank version",
    ),
    "ls": _gnu(
        "1ABCDFGHLNQRSUXZabcdfghiklmnopqrstuvx",
        "ITw",
        "all almost-all author block-size= classify[=] color[=] context dereference "
        "dereference-command-line dereference-command-line-symlink-to-dir directory dired "
        "escape file-type format= full-time group-directories-first help hide= "
        "hide-control-chars human-readable hyperlink[=] ignore= ignore-backups "
        "indicator-style= inode kibibytes literal no-group numeric-uid-gid quote-name "
        "quoting-style= recursive reverse show-control-chars si size sort= tabsize= time= "
        "time-style= version width= zero",
    ),
    "head": _gnu("qvz", "cn", "bytes= help lines= quiet silent verbose version zero-terminated"),
    "tail": _gnu(
        "Ffqvz",
        "cns",
        "bytes= follow[=] help lines= max-unchanged-stats= pid= quiet retry silent "
        "sleep-interval= verbose version zero-terminated",
    ),
    "wc": _gnu("Lclmw", "", "bytes chars files0-from= help lines max-line-length version words"),
    "sort": _gnu(
        "CMRVbcdfghimnrsuz",
        "STkot",
        "batch-size= buffer-size= check[=] compress-program= debug dictionary-order "
        "field-separator= files0-from= general-numeric-sort help human-numeric-sort "
        "ignore-case ignore-leading-blanks ignore-nonprinting key= merge month-sort "
        "numeric-sort output= parallel= random-sort random-source= reverse sort= stable "
        "temporary-directory= unique version version-sort zero-terminated",
        "o",
        "output",
        "compress-program",
    ),
    "grep": _gnu(
        "EFGHILPRTUVZabchilnoqrsvwxz",
        "ABCDdefm",
        "after-context= basic-regexp before-context= binary binary-files= byte-offset "
        "color[=] colour[=] context= count dereference-recursive devices= directories= "
        "exclude= exclude-dir= exclude-from= extended-regexp file= files-with-matches "
        "files-without-match fixed-strings group-separator= help ignore-case include= "
        "initial-tab invert-match label= line-buffered line-number line-regexp max-count= "
        "no-filename no-group-separator no-ignore-case no-messages null null-data "
        "only-matching perl-regexp quiet recursive regexp= silent text version "
        "with-filename word-regexp",
    ),
    "date": _gnu(
        "Ru",
        "dfrs",
        "date= debug file= help iso-8601[=] reference= resolution rfc-3339= rfc-email set= "
        "universal utc version",
        "s",
        "set",
        attached="I",
    ),
    "file": _gnu(
        "0CLNSZbcdhiklnprsvz",
        "eFfmP",
        "apple brief checking-printout compile debug dereference exclude= exclude-quiet= "
        "extension files-from= help keep-going list magic-file= mime mime-encoding "
        "mime-type no-buffer no-dereference no-pad no-sandbox parameter= preserve-date "
        "print0 raw separator= special-files uncompress uncompress-noreport version",
        "C",
        "compile",
    ),
    "stat": _gnu("Lft", "c", "cached= dereference file-system format= help printf= terse version"),
    "cut": _gnu(
        "nsz",
        "bcdf",
        "bytes= characters= complement delimiter= fields= help only-delimited "
        "output-delimiter= version zero-terminated",
    ),
    "du": _gnu(
        "0DHLPSabchklmsx",
        "BXdt",
        "all apparent-size block-size= bytes count-links dereference dereference-args "
        "exclude= exclude-from= files0-from= help human-readable inodes max-depth= "
        "no-dereference null one-file-system separate-dirs si summarize threshold= time[=] "
        "time-style= total version",
    ),
    "df": _gnu(
        "HPTahiklv",
        "Btx",
        "all block-size= exclude-type= help human-readable inodes local no-sync output[=] "
        "portability print-type si sync total type= version",
    ),
    "diff": _gnu(
        "BENTZabcdilnpqrstuvwy",
        "CDFISUWXx",
        "brief color[=] context[=] ed exclude= exclude-from= expand-tabs from-file= help "
        "horizon-lines= ifdef= ignore-all-space ignore-blank-lines ignore-case "
        "ignore-file-name-case ignore-matching-lines= ignore-space-change "
        "ignore-tab-expansion ignore-trailing-space initial-tab label= left-column "
        "line-format= minimal new-file no-dereference no-ignore-file-name-case normal "
        "paginate palette= rcs recursive report-identical-files show-c-function "
        "show-function-line= side-by-side speed-large-files starting-file= "
        "strip-trailing-cr suppress-blank-empty suppress-common-lines tabsize= text "
        "to-file= unidirectional-new-file unified[=] version width=",
    ),
    "uniq": _gnu(
        "Dcdiuz",
        "fsw",
        "all-repeated[=] check-chars= count group[=] help ignore-case repeated skip-chars= "
        "skip-fields= unique version zero-terminated",
    ),
    "od": _gnu(
        "bcdfilosvx",
        "ANSjt",
        "address-radix= endian= format= help output-duplicates read-bytes= skip-bytes= "
        "strings[=] traditional version width[=]",
        attached="w",
    ),
    "nl": _gnu(
        "p",
        "bdfhilnsvw",
        "body-numbering= footer-numbering= header-numbering= help join-blank-lines= "
        "line-increment= no-renumber number-format= number-separator= number-width= "
        "section-delimiter= starting-line-number= version",
    ),
    "paste": _gnu("sz", "d", "delimiters= help serial version zero-terminated"),
    "comm": _gnu(
        "123z", "", "check-order help nocheck-order output-delimiter= total version zero-terminated"
    ),
    "cmp": _gnu(
        "blsv", "in", "bytes= help ignore-initial= print-bytes quiet silent verbose version"
    ),
    "fold": _gnu("bs", "w", "bytes help spaces version width="),
    "expand": _gnu("i", "t", "help initial tabs= version"),
    "unexpand": _gnu("a", "t", "all first-only help tabs= version"),
    "tac": _gnu("br", "s", "before help regex separator= version"),
    "rev": _gnu("Vh", "", "help version"),
    "strings": _gnu(
        "adfhovw",
        "Tenst",
        "all bytes= data encoding= help include-all-whitespace print-file-name radix= "
        "target= unicode= version output-separator=",
    ),
    "md5sum": _gnu(*_SUMS),
    "sha1sum": _gnu(*_SUMS),
    "sha256sum": _gnu(*_SUMS),
    "sha512sum": _gnu(*_SUMS),
    "cksum": _gnu(
        "cwz",
        "al",
        "algorithm= base64 check debug help ignore-missing length= quiet raw status strict "
        "tag untagged version warn zero",
    ),
    "basename": _gnu("az", "s", "help multiple suffix= version zero"),
    "dirname": _gnu("z", "", "help version zero"),
    "readlink": _gnu(
        "efmnqsvz",
        "",
        "canonicalize canonicalize-existing canonicalize-missing help no-newline quiet "
        "silent verbose version zero",
    ),
    "realpath": _gnu(
        "LPemqsz",
        "",
        "canonicalize-existing canonicalize-missing help logical no-symlinks physical quiet "
        "relative-base= relative-to= strip version zero",
    ),
    "column": _gnu(
        "JLVehinrtx",
        "CEHNORTWcdlops",
        "fillrows help json keep-empty-lines output-separator= output-width= separator= "
        "table table-columns= table-columns-limit= table-empty-lines table-header-repeat "
        "table-hide= table-name= table-noextreme= table-noheadings table-order= "
        "table-right= table-truncate= table-wrap= tree= tree-id= tree-parent= version",
    ),
    "seq": _gnu("w", "fs", "equal-width format= help separator= version"),
    "id": _gnu("Gagnruz", "", "context group groups help name real user version zero"),
    "whoami": _gnu("", "", "help version"),
    "uname": _gnu(
        "aimnoprsv",
        "",
        "all hardware-platform help kernel-name kernel-release kernel-version machine "
        "nodename operating-system processor version",
    ),
    "tr": _gnu("cdst", "", "complement delete help squeeze-repeats truncate-set1 version"),
    "tree": Options(
        "ACDFJNQRSXacdfghilnpqrstuvx",
        "HILPTo",
        "charset= dirsfirst du filelimit= fromfile gitignore help ignore-case info inodes "
        "device matchdirs metafirst noreport nolinks prune si sort= timefmt= version "
        "filesfirst",
        frozenset({"o"}),
        abbreviations=False,
    ),
    "rg": Options(
        "0.FHILNPSUVabcehijlnopqsuvwxz",
        "ABCEMTdefgjmrt",
        "after-context= before-context= binary case-sensitive color= colors= column "
        "context= count count-matches crlf debug encoding= engine= file= files "
        "files-with-matches files-without-match fixed-strings follow glob= "
        "glob-case-insensitive heading hidden iglob= ignore-case ignore-file= invert-match "
        "json line-buffered line-number line-regexp max-columns= max-count= max-depth= "
        "max-filesize= multiline multiline-dotall no-config no-filename no-heading "
        "no-ignore no-ignore-dot no-ignore-vcs no-line-number no-messages no-require-git "
        "null null-data one-file-system only-matching passthru path-separator= pcre2 "
        "pre= pre-glob= pretty quiet regexp= replace= search-zip smart-case sort= sortr= "
        "stats text threads= trim type= type-list type-not= unrestricted vimgrep "
        "with-filename word-regexp",
        frozenset({"pre"}),
        abbreviations=False,
    ),
}
READ_ONLY = frozenset({*PROGRAMS, "egrep", "fgrep", "find"})
# Programs that write or run with some option or operand: a word that expands into file
# names could become one.
OPTION_SENSITIVE = frozenset({*(n for n, o in PROGRAMS.items() if o.refused), "find", "uniq"})
# Arguments are text or expressions, never options that write or run.
FREE = frozenset({"echo", "printf", "test", "[", "true", "false", "pwd", "jq"})
# find's expression: what each word starting with "-" is.
_FIND_VALUED_TEXT = (
    "-maxdepth -mindepth -regextype -name -iname -path -ipath -wholename -iwholename -regex "
    "-iregex -type -xtype -size -perm -user -group -uid -gid -mtime -atime -ctime -mmin -amin "
    "-cmin -newer -anewer -cnewer -links -inum -samefile -lname -ilname -fstype -used -context "
    "-printf"
)
_FIND_VALUED = frozenset(_FIND_VALUED_TEXT.split())
_FIND_PLAIN_TEXT = (
    "-depth -xdev -mount -follow -noleaf -daystart -ignore_readdir_race "
    "-noignore_readdir_race -warn -nowarn -empty -executable -readable -writable -nouser "
    "-nogroup -true -false -print -print0 -ls -prune -quit -a -o -and -or -not -H -L -P ! ( ) , "
    "-help --help -version --version"
)
_FIND_PLAIN = frozenset(_FIND_PLAIN_TEXT.split())


def reads_only(name: str, args: Sequence[str]) -> bool:
    """True when `name args...` uses only options known not to write or run anything."""
    if name in FREE:
        return True
    name = {"egrep": "grep", "fgrep": "grep"}.get(name, name)
    if name == "find":
        return _find_reads(args)
    options = PROGRAMS.get(name)
    if options is None:
        return False
    operands = _operands(options, args)
    if operands is None:
        return False
    # `uniq in out` writes its second operand.
    return not (name == "uniq" and len(operands) > 1)


def _operands(options: Options, args: Sequence[str]) -> list[str] | None:
    """The operands, or None when an option is unknown, ambiguous or refused."""
    longs = options.long_names()
    operands: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            return operands + list(args[i:])
        if arg.startswith("--"):
            name, eq, _ = arg[2:].partition("=")
            found = _long(name, longs, options.abbreviations)
            if found is None or found in options.refused:
                return None
            kind = longs[found]
            if eq and not kind:
                return None  # --count=3: the program refuses it; nothing to decide here
            if kind == "=" and not eq:
                i += 1
            continue
        if arg.startswith("-") and len(arg) > 1:
            skip = _cluster(options, arg[1:])
            if skip is None:
                return None
            i += skip
            continue
        operands.append(arg)
    return operands


def _long(name: str, longs: dict[str, str], abbreviations: bool) -> str | None:
    if name in longs:
        return name
    if not abbreviations or not name:
        return None
    matches = [n for n in longs if n.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def _cluster(options: Options, cluster: str) -> int | None:
    """How many following words the cluster's value takes (0 or 1), None if refused."""
    for k, letter in enumerate(cluster):
        if letter in options.refused:
            return None
        if letter in options.valued:
            return 0 if cluster[k + 1 :] else 1
        if letter in options.attached:
            return 0
        if letter not in options.flags and not letter.isdigit():
            return None
    return 0


def _find_reads(args: Sequence[str]) -> bool:
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg in _FIND_VALUED or re.fullmatch(r"-newer[aBcm][aBcmt]", arg):
            i += 1
        elif (
            arg.startswith("-")
            and len(arg) > 1
            and arg not in _FIND_PLAIN
            and not (arg.startswith("-O") and arg[2:].isdigit())
        ):
            return False  # -delete, -exec, -fprint ... or a predicate not known here
    return True
