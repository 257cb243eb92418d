"""Which commands count as read-only after outside content entered a turn (issue 30 finding
8): options are parsed as the programs parse them, GNU abbreviations included, and an
option the table does not know is not read-only."""

import pytest

from tools.shell.options import PROGRAMS, reads_only
from tools.shell.readonly import frees_space, read_only

# Each of these writes a file or runs a program; the first five counted as read-only.
WRITES_OR_RUNS = [
    "sort --compress-prog=sh data.txt",
    "sort --out=x data.txt",
    "sort --compress=sh data.txt",
    "file --comp",
    "date --se='2020-01-01'",
    "sort --output x data.txt",
    "sort --compress-program sh data.txt",
    "sort -uo x data.txt",
    "sort -o x data.txt",
    "sort --o=x data.txt",  # unique prefix of --output
    "file -C -m magic",
    "file --compile",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "date -us 2020-01-01",
    "tree -o listing.txt",
    "rg --pre ./evil.sh pattern",
    "find . -fprint out",
    "find . -fls out",
    "find . -okdir rm {} ;",
    "find . -delete",
    "uniq in.txt out.txt",
    # a glob or brace may become an option: a downloaded file named -ofoo makes sort write
    "sort *",
    "sort {-o,x} a",
    "uniq *.txt",
    "find * -name x",
    # quoting that is not plain
    "sort $'--output=x' data.txt",
    # options nobody checked: fail closed
    "grep --frobnicate x file",
    "ls --evil",
    "cat -Y file",
    "sort --s data.txt",  # ambiguous prefix (--sort, --stable ...)
    "find . -newerXY x",
    "rg --pre-glob-x x",
]

READS = [
    "ls -la",
    "ls --all --human-readable",
    "ls --human",  # unique prefix of --human-readable
    "ls *.py",
    "grep -rn --include='*.py' TODO .",
    "grep -e -o file.txt",  # -o here is grep's pattern
    "grep --colour=always x f",
    "egrep -i 'a|b' f",
    "cat notes.txt | grep -i todo | sort | uniq -c",
    "sort -k2 -t, -n data.csv",
    "sort --key=2 --field-separator=, data.csv",
    "sort -u data.txt",
    "sort --parallel=2 --buffer-size=10M data.txt",
    "find . -name '*.py' -newer setup.py",
    "find . -type f -mmin -5 -print0",
    "find . -maxdepth 2 ! -name '*.o' -printf '%p\\n'",
    "find . -newermt 2020-01-01",
    "date +%Y-%m-%d",
    "date -Iseconds",
    "date -u -d '1 day ago'",
    "date --date='next monday' --utc",
    "file -b --mime-type a.png",
    "head -5 a.txt",
    "tail -n 20 -f log.txt",
    "wc -l < data.csv",
    "du -sh --max-depth=1 .",
    "df -h /",
    "diff -u a b",
    "jq -r '.name' package.json",
    "echo --output=x",
    "printf '%s\\n' --compress-program=sh",
    "stat -c %s file",
    "cut -d, -f1 data.csv",
    "uniq -c sorted.txt",
    "sha256sum --check sums.txt",
    "rg -n --hidden pattern",
    "tree -L 2 --dirsfirst",
]


@pytest.mark.parametrize("command", WRITES_OR_RUNS)
def test_writing_running_or_unknown_options_are_not_read_only(command: str) -> None:
    assert not read_only(command)


@pytest.mark.parametrize("command", READS)
def test_reading_options_stay_read_only(command: str) -> None:
    assert read_only(command)


def test_abbreviations_are_resolved_like_getopt_long() -> None:
    assert not reads_only("sort", ["--compress-p=sh"])
    assert not reads_only("sort", ["--outp", "x"])
    assert reads_only("sort", ["--rev", "a"])  # --reverse
    assert not reads_only("sort", ["--r", "a"])  # --reverse, --random-sort, --random-source
    # Programs that do not accept abbreviations do not get them here either.
    assert not reads_only("rg", ["--hid", "x"])
    assert reads_only("rg", ["--hidden", "x"])


def test_every_refused_option_is_an_option_of_its_program() -> None:
    """A refused name that is not in the program's own table could never match."""
    for name, options in PROGRAMS.items():
        longs = options.long_names()
        for refused in options.refused:
            known = refused in longs or refused in options.flags + options.valued
            assert known, (name, refused)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("[ -f notes.txt ] && cat notes.txt", True),
        ("[[ -d src ]] || ls", True),
        ("test -f a && head a", True),
        ("[ -f $X ] && cat x", False),
        ("[[ $(curl https://evil.example) ]]", False),
        ("[ -f a ] && rm a", False),
        ("(ls)", False),
        ("{ ls; }", False),
        ("ls > out.txt", False),
        ("ls 2>&1 | head", True),
        ("cat < notes.txt", True),
        ("cat < $F", False),
    ],
)
def test_tests_and_structure(command: str, expected: bool) -> None:
    assert read_only(command) is expected


@pytest.mark.parametrize(
    ("command", "frees"),
    [
        ("rm -rf build", True),
        ("rm a b && rmdir dir; ls -la", True),
        ("unlink old.log 2>/dev/null", True),
        ("rm $(cat list)", False),  # what it removes is known only when it runs
        ("rm a > kept", False),  # a redirect writes
        ("echo x > f", False),
        ("rm a && cp b c", False),
        ("rm 'unclosed", False),
    ],
)
def test_what_a_full_workspace_may_still_run(command: str, frees: bool) -> None:
    assert frees_space(command) is frees
