"""Destructive statements in SQL (and Mongo / Redis commands): which ones, and each named
by its kind and object (`DROP TABLE tmp`), so an approval covers exactly that statement."""

from __future__ import annotations

import re

_SQL_COMMENT = re.compile(r"/\*.*?\*/|--[^\n]*|#[^\n]*", re.S)
# String literals ('it''s', E'..'): keywords inside them are data, not statements.
_SQL_STRING = re.compile(r"[EeNn]?'(?:[^']|'')*'")
_SQL_DROP = re.compile(
    r"\b(DROP\s+(TABLE|DATABASE|SCHEMA|INDEX|VIEW|USER|ROLE|TRIGGER|FUNCTION|"
    r"PROCEDURE|SEQUENCE|TYPE|COLLECTION|KEYSPACE|OWNED)|TRUNCATE)\b"
    r"(\s+(IF\s+EXISTS|TABLE|ONLY|BY))*\s*([^\s;,(]+)?",
    re.I,
)
_SQL_UNGUARDED = re.compile(r"^\s*(DELETE\s+FROM|UPDATE)\s+(\S+)(\s+SET)?\b", re.I)
_SQL_ALTER_DROP = re.compile(r"\bALTER\s+TABLE\s+(\S+).*\bDROP\b", re.I | re.S)
_MONGO = re.compile(
    r"[\w.]*(dropDatabase|\.drop\s*\(|dropAllUsers|delete(Many|One)\s*\(\s*\{\s*\}|"
    r"\.remove\s*\(\s*\{\s*\})",
    re.I,
)
_REDIS = re.compile(r"\b(FLUSHALL|FLUSHDB)\b", re.I)


def dangerous_sql(text: str) -> tuple[str, list[str]] | None:
    """(why the batch destroys data, every destructive statement as `KIND object`), or None."""
    found: list[str] = []
    reason = ""
    if m := _REDIS.search(text):
        reason, found = "FLUSHALL/FLUSHDB erases the database", [m.group(1).upper()]
    for m in _MONGO.finditer(text):
        reason = reason or "drops or empties a collection"
        found.append(" ".join(m.group(0).split()))
    clean = _SQL_STRING.sub("''", _SQL_COMMENT.sub(" ", _SQL_STRING.sub(_keep, text)))
    for statement in clean.split(";"):
        why, what = _statement(statement)
        if why:
            reason = reason or why
            found.append(what)
    return (reason, found) if found else None


def _keep(m: re.Match[str]) -> str:
    """Blank a string literal's content first, so `--` or `#` inside it is no comment."""
    return "'" + " " * (len(m.group(0)) - 2) + "'"


def _statement(statement: str) -> tuple[str, str]:
    if m := _SQL_DROP.search(statement):
        kind = " ".join(m.group(1).split()).upper()
        target = m.group(5) or ""
        return f"{kind} destroys data", f"{kind} {target}".strip()
    guarded = re.search(r"\bWHERE\b(?!\s*(1\s*=\s*1|TRUE|1)\s*$)", statement, re.I)
    if (m := _SQL_UNGUARDED.search(statement)) and not guarded:
        if m.group(1).upper().startswith("UPDATE") and not m.group(3):
            return "", ""
        verb = m.group(1).split()[0].upper()
        return f"{verb} without WHERE changes every row", f"{verb} {m.group(2)}"
    if m := _SQL_ALTER_DROP.search(statement):
        return "ALTER TABLE ... DROP removes columns or constraints", " ".join(statement.split())
    return "", ""
