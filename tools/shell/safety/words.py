"""Turn parsed word nodes into the argv words bash would pass, as far as that is knowable:
quotes, escapes, $'..', $IFS, braces and known variables, re-read from the source text."""

from __future__ import annotations

import bisect
import dataclasses
import fnmatch
import itertools
import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tools.shell.safety.model import Word
from tools.shell.safety.syntax import Node, descendants

MAX_BRACE_WORDS = 64
_PLAIN = re.compile(r"[^\\'\"$`<>]+")
_PLAIN_QUOTED = re.compile(r"[^\\\"$`]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PARAM = re.compile(
    r"(?P<bang>!?)(?P<name>[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])(?P<sub>\[[^\]]*\])?(?P<op>.*)",
    re.S,
)
_ANSI = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}

# $0 in `bash -c` is the shell itself; these are guesses, so the word stays dynamic.
_SHELL_PARAMS = {"0": "bash", "SHELL": "/bin/bash", "BASH": "/bin/bash"}

# Piece kinds: how a run of characters was quoted, which decides brace expansion and splitting.
LIT, QUOTED, SPLIT, QEXP = "lit", "quoted", "split", "qexp"

Substitute = Callable[[Node], "str | None"]


@dataclass
class _Piece:
    text: str
    kind: str
    dynamic: bool = False  # value unknown at check time
    computed: bool = False
    names: frozenset[str] = frozenset()
    guess: bool = False  # text is a plausible value (a ${X:-default}), not the raw expansion
    procsub: bool = False  # <(..) or >(..)

    @property
    def pattern(self) -> str:
        return "*" if self.dynamic and not self.guess else self.text


def decode_ansi_c(body: str) -> str:
    """Decode the inside of a $'...' string the way bash does."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\" or i + 1 >= len(body):
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ANSI:
            out.append(_ANSI[nxt])
            i += 2
        elif nxt == "x" or nxt in "uU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = re.match(f"[0-9a-fA-F]{{1,{width}}}", body[i + 2 :])
            if digits:
                out.append(chr(min(int(digits.group(), 16), 0x10FFFF)))
                i += 2 + len(digits.group())
            else:
                out.append("\\" + nxt)
                i += 2
        elif nxt in "01234567":
            digits = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert digits is not None
            out.append(chr(int(digits.group(), 8) & 0xFF))
            i += 1 + len(digits.group())
        elif nxt == "c" and i + 2 < len(body):
            out.append(chr(ord(body[i + 2]) & 0x1F))
            i += 3
        else:
            out.append("\\" + nxt)
            i += 2
    return "".join(out)


def resolve_parameter(value: str, env: Mapping[str, str]) -> tuple[str | None, bool]:
    """The value of ${value} if it can be known: (text or None, exact?)."""
    m = _PARAM.fullmatch(value)
    if not m or m.group("bang") or m.group("sub"):
        return None, False
    name, op = m.group("name"), m.group("op")
    if name == "IFS":
        return " ", True
    if name in _SHELL_PARAMS and name not in env:
        return _SHELL_PARAMS[name], False  # most likely value, still unknown
    base = "~" if name == "HOME" else env.get(name)
    if not op:
        return base, base is not None
    for prefix in (":-", "-", ":=", "=", ":+", "+"):
        if op.startswith(prefix):
            word = re.sub(r"[\"'\\]", "", op[len(prefix) :])
            if prefix.endswith(("-", "=")) and base:
                return base, True
            return word, False  # unknown at run time; the alternative is a plausible value
    if base is None:
        return None, False
    changed = _operate(base, op)
    return changed, changed is not None


def _operate(base: str, op: str) -> str | None:
    """${X<op>} for the operators worth following: substrings, trims, replacement, case."""
    if m := re.fullmatch(r":\s*(-?\d+)(?::\s*(-?\d+))?", op):
        start = int(m.group(1))
        start = max(len(base) + start, 0) if start < 0 else start
        if m.group(2) is None:
            return base[start:]
        length = int(m.group(2))
        end = len(base) + length if length < 0 else start + length
        return base[start:end]
    if m := re.fullmatch(r"(##?|%%?)(.*)", op, re.S):
        return _trim(base, m.group(1), m.group(2))
    if m := re.fullmatch(r"/(/?)([^/]*)/?(.*)", op, re.S):
        pat, rep = m.group(2), m.group(3)
        if not pat or re.search(r"[*?\[#%]", pat):
            return None
        return base.replace(pat, rep) if m.group(1) else base.replace(pat, rep, 1)
    return {
        "^^": base.upper(),
        ",,": base.lower(),
        "^": base[:1].upper() + base[1:],
        ",": base[:1].lower() + base[1:],
    }.get(op)


def _trim(base: str, how: str, pat: str) -> str:
    cuts = range(len(base) + 1)
    if how.startswith("#"):
        hits = [i for i in cuts if fnmatch.fnmatchcase(base[:i], pat)]
        if not hits:
            return base
        return base[(max(hits) if how == "##" else min(hits)) :]
    hits = [i for i in cuts if fnmatch.fnmatchcase(base[i:], pat)]
    if not hits:
        return base
    return base[: (min(hits) if how == "%%" else max(hits))]


def command_names(node: Node) -> frozenset[str]:
    """Crude names of every command under a node, for "is curl upstream?" questions."""
    names: set[str] = set()
    for current in descendants(node):
        if current.kind == "command":
            for part in current.parts:
                if part.kind == "word":
                    names.add(posixpath.basename(re.sub(r"[\"'\\]", "", part.text)))
                    break
    return frozenset(names)


class WordExpander:
    """Expands word nodes of one parsed source text."""

    def __init__(self, source: str, env: Mapping[str, str], substitute: Substitute) -> None:
        self._source = source
        self._env = env
        self._substitute = substitute

    def words(self, node: Node) -> list[Word]:
        """The argv words a word node becomes (braces expanded, unquoted results split)."""
        pieces = self._lex(node)
        chars = [(ch, idx) for idx, piece in enumerate(pieces) for ch in piece.text]
        separators = " \t\n" + self._env.get("IFS", "")  # a custom IFS splits on its characters too
        results: list[Word] = []
        for variant in _braces(chars, pieces):
            results.extend(_split(variant, pieces, separators))
        return [self._with_raw(w, node) for w in results]

    def single(self, node: Node) -> Word:
        """The word as one string (assignment values, redirect targets)."""
        pieces = self._lex(node)
        chars = [(ch, idx) for idx, piece in enumerate(pieces) for ch in piece.text]
        return self._with_raw(_to_word(chars, pieces), node)

    def _with_raw(self, word: Word, node: Node) -> Word:
        if not word.computed:
            return word
        start, end = node.pos
        return dataclasses.replace(word, raw=self._source[start:end])

    def _lex(self, node: Node) -> list[_Piece]:
        # The parser's pieces do not say how bash joins and unquotes them ("r"'m', $'\x72m'),
        # so the raw source text is lexed again here, with the expansions it found.
        start, end = node.pos
        raw = self._source[start:end]
        parts = {p.pos[0] - start: p for p in node.parts if p.pos[0] >= start}
        return _Lexer(raw, parts, start, self).run()

    def expansion(self, part: Node, raw: str, quoted: bool) -> _Piece:
        kind = QEXP if quoted else SPLIT
        if part.kind in ("commandsubstitution", "processsubstitution"):
            names = command_names(part)
            if part.kind == "processsubstitution":
                return _Piece("/dev/fd/63", QUOTED, computed=True, names=names, procsub=True)
            value = self._substitute(part)
            if value is None:
                return _Piece(raw, kind, dynamic=True, computed=True, names=names)
            return _Piece(value.rstrip("\n"), kind, computed=True, names=names)
        if part.kind == "parameter":
            value = part.text
            if value == "@":
                kind = SPLIT  # "$@" is one word per argument, quoted or not
            text, exact = resolve_parameter(value, self._env)
            if text is not None:
                return _Piece(text, kind, dynamic=not exact, computed=True, guess=True)
        return _Piece(raw, kind, dynamic=True, computed=True)


class _Lexer:
    """Walks the raw text of one word, honouring quotes; expansions come from the parser."""

    def __init__(self, raw: str, parts: dict[int, Node], offset: int, owner: WordExpander) -> None:
        self.raw, self.parts, self.offset, self.owner = raw, parts, offset, owner
        self.pieces: list[_Piece] = []
        self.i = 0
        self._starts = sorted(parts)

    def _plain_end(self, plain: re.Pattern[str]) -> int:
        """Where the run of characters with no special meaning from here ends (at the
        latest where the parser found an expansion)."""
        m = plain.match(self.raw, self.i)
        end = m.end() if m else self.i + 1
        at = bisect.bisect_right(self._starts, self.i)
        return min(end, self._starts[at]) if at < len(self._starts) else end

    def emit(self, text: str, kind: str) -> None:
        if not text:
            return
        last = self.pieces[-1] if self.pieces else None
        if last is not None and last.kind == kind and last == _Piece(last.text, kind):
            last.text += text  # one piece per run of plain characters, not per character
        else:
            self.pieces.append(_Piece(text, kind))

    def run(self) -> list[_Piece]:
        raw = self.raw
        while self.i < len(raw):
            if self._expansion(quoted=False):
                continue
            ch = raw[self.i]
            if ch == "\\":
                if raw.startswith("\\\n", self.i):
                    self.i += 2
                else:
                    self.emit(raw[self.i + 1 : self.i + 2] or "\\", QUOTED)
                    self.i += 2
            elif ch == "'":
                close = raw.find("'", self.i + 1)
                close = len(raw) if close < 0 else close
                self.pieces.append(_Piece(raw[self.i + 1 : close], QUOTED))
                self.i = close + 1
            elif raw.startswith("$'", self.i):
                close = _ansi_end(raw, self.i + 2)
                self.pieces.append(_Piece(decode_ansi_c(raw[self.i + 2 : close]), QUOTED))
                self.i = close + 1
            elif ch == '"' or raw.startswith('$"', self.i):
                self.i += 1 if ch == '"' else 2
                self._double_quoted()
            else:
                end = self._plain_end(_PLAIN)
                self.emit(raw[self.i : end], LIT)
                self.i = end
        return self.pieces

    def _double_quoted(self) -> None:
        raw = self.raw
        while self.i < len(raw) and raw[self.i] != '"':
            if self._expansion(quoted=True):
                continue
            ch = raw[self.i]
            if ch == "\\" and self.i + 1 < len(raw) and raw[self.i + 1] in '$`"\\\n':
                if raw[self.i + 1] != "\n":
                    self.emit(raw[self.i + 1], QUOTED)
                self.i += 2
            else:
                end = self._plain_end(_PLAIN_QUOTED)
                self.emit(raw[self.i : end], QUOTED)
                self.i = end
        self.i += 1
        self.pieces.append(_Piece("", QUOTED))  # so that "" still makes an (empty) word

    def _expansion(self, *, quoted: bool) -> bool:
        part = self.parts.get(self.i)
        if part is None:
            if self.raw[self.i] == "`" or (
                self.raw[self.i] == "$" and _NAME.match(self.raw, self.i + 1)
            ):
                end = self._unparsed_end()
                self.pieces.append(
                    _Piece(self.raw[self.i : end], SPLIT, dynamic=True, computed=True)
                )
                self.i = end
                return True
            return False
        end = part.pos[1] - self.offset
        self.pieces.append(self.owner.expansion(part, self.raw[self.i : end], quoted))
        self.i = max(end, self.i + 1)
        return True

    def _unparsed_end(self) -> int:
        if self.raw[self.i] == "`":
            close = self.raw.find("`", self.i + 1)
            return len(self.raw) if close < 0 else close + 1
        m = _NAME.match(self.raw, self.i + 1)
        return m.end() if m else self.i + 1


def _ansi_end(raw: str, i: int) -> int:
    while i < len(raw):
        if raw[i] == "\\":
            i += 2
        elif raw[i] == "'":
            return i
        else:
            i += 1
    return len(raw)


_Chars = list[tuple[str, int]]


def _braces(chars: _Chars, pieces: list[_Piece], budget: int = MAX_BRACE_WORDS) -> list[_Chars]:
    """Bash brace expansion over unquoted characters: {rm,-rf,/} is three words."""
    for i, (ch, idx) in enumerate(chars):
        if ch != "{" or pieces[idx].kind != LIT:
            continue
        if i and chars[i - 1][0] == "$" and pieces[chars[i - 1][1]].kind == LIT:
            continue
        depth, commas, close = 0, [], -1
        for j in range(i, len(chars)):
            c, k = chars[j][0], pieces[chars[j][1]].kind
            if k != LIT:
                continue
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    close = j
                    break
            elif c == "," and depth == 1:
                commas.append(j)
        if close < 0 or not commas:
            continue
        bounds = [i, *commas, close]
        out: list[_Chars] = []
        for a, b in itertools.pairwise(bounds):
            if len(out) >= budget:
                break
            rest = chars[:i] + chars[a + 1 : b] + chars[close + 1 :]
            out += _braces(rest, pieces, budget - len(out))
        return out
    return [chars]


def _split(chars: _Chars, pieces: list[_Piece], separators: str) -> list[Word]:
    """Field splitting: IFS characters from unquoted expansions separate words."""
    fields: list[_Chars] = [[]]
    for ch, idx in chars:
        piece = pieces[idx]
        # An unknown value is kept whole: the spaces of `$(pgrep -f x)` as written say
        # nothing about how its output splits (it stays one run-time word, a `*`).
        if ch in separators and piece.kind == SPLIT and not (piece.dynamic and not piece.guess):
            fields.append([])
        else:
            fields[-1].append((ch, idx))
    keep_empty = not chars and any(p.kind in (QUOTED, QEXP) for p in pieces)
    return [_to_word(f, pieces) for f in fields if f or (keep_empty and len(fields) == 1)]


def _to_word(chars: _Chars, pieces: list[_Piece]) -> Word:
    text = "".join(ch for ch, _ in chars)
    pattern: list[str] = []
    last = -1
    for ch, idx in chars:
        piece = pieces[idx]
        if piece.pattern == "*":
            if idx != last:
                pattern.append("*")
        else:
            pattern.append(ch)
        last = idx
    used = [pieces[i] for i in sorted({idx for _, idx in chars})]
    names: frozenset[str] = frozenset().union(*(p.names for p in used)) if used else frozenset()
    return Word(
        text=text,
        pattern="".join(pattern) if chars else "",
        dynamic=any(p.dynamic for p in used),
        computed=any(p.computed for p in used),
        subcommands=names,
        procsub=any(p.procsub for p in used),
    )
