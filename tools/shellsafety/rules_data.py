"""Rules about data flowing into dangerous places: destructive SQL sent to a database
client, downloaded or decoded code run by a shell, and the cloud metadata service."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

from tools.shellsafety.argv import parse_flags
from tools.shellsafety.context import Context, Rule
from tools.shellsafety.model import Command, Hit
from tools.shellsafety.names import DECODERS, DOWNLOADERS, is_interpreter, is_shell

_SQL_COMMENT = re.compile(r"/\*.*?\*/|--[^\n]*|#[^\n]*", re.S)
_SQL_DROP = re.compile(
    r"\b(DROP\s+(TABLE|DATABASE|SCHEMA|INDEX|VIEW|USER|ROLE|TRIGGER|FUNCTION|"
    r"PROCEDURE|SEQUENCE|TYPE|COLLECTION|KEYSPACE|OWNED)|TRUNCATE)\b",
    re.I,
)
_SQL_UNGUARDED = re.compile(r"^\s*(DELETE\s+FROM|UPDATE\s+\S+\s+SET)\b", re.I)
_SQL_ALTER_DROP = re.compile(r"\bALTER\s+TABLE\b.*\bDROP\b", re.I | re.S)
_MONGO = re.compile(
    r"dropDatabase|\.drop\s*\(|dropAllUsers|delete(Many|One)\s*\(\s*\{\s*\}|"
    r"\.remove\s*\(\s*\{\s*\}",
    re.I,
)
_REDIS = re.compile(r"\b(FLUSHALL|FLUSHDB)\b", re.I)
# Options carrying statements, per client.
_SQL_OPTIONS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "psql": ("cfdUhpW", ("-c", "--command"), ("--command", "--file", "--dbname")),
    "mysql": ("euhpPDS", ("-e", "--execute"), ("--execute", "--user", "--host", "--database")),
    "mariadb": ("euhpPDS", ("-e", "--execute"), ("--execute", "--user", "--host")),
    "clickhouse-client": ("qhu", ("-q", "--query"), ("--query", "--host", "--user")),
    "cqlsh": ("eu", ("-e", "--execute"), ("--execute",)),
    "sqlcmd": ("QqSUPd", ("-Q", "-q"), ()),
    "mongo": ("uph", ("--eval",), ("--eval",)),
    "mongosh": ("uph", ("--eval",), ("--eval",)),
}
_POSITIONAL_SQL = frozenset({"sqlite3", "sqlite", "duckdb", "redis-cli", "spatialite"})
_METADATA_NAMES = frozenset(
    {
        "metadata.google.internal",
        "metadata",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)
_METADATA_IPS = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("100.100.100.200/32"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
_HOSTISH = re.compile(r"[\w.\-:\[\]%]+")
_PROC_SECRETS = re.compile(r"/proc/[^/]+/(task/[^/]+/)?(environ|mem)")
_LATER = frozenset({"at", "batch"})  # run the commands on their input later


def dangerous_sql(text: str) -> str | None:
    """Why a batch of SQL (or Mongo/Redis commands) destroys data, or None."""
    if _REDIS.search(text):
        return "FLUSHALL/FLUSHDB erases the database"
    if _MONGO.search(text):
        return "drops or empties a collection"
    clean = _SQL_COMMENT.sub(" ", text)
    if m := _SQL_DROP.search(clean):
        return f"{' '.join(m.group(0).split()).upper()} destroys data"
    for statement in clean.split(";"):
        guarded = re.search(r"\bWHERE\b(?!\s*(1\s*=\s*1|TRUE|1)\s*$)", statement, re.I)
        if _SQL_UNGUARDED.search(statement) and not guarded:
            verb = statement.split()[0].upper()
            return f"{verb} without WHERE changes every row"
        if _SQL_ALTER_DROP.search(statement):
            return "ALTER TABLE ... DROP removes columns or constraints"
    return None


def sql_clients(cmd: Command, ctx: Context) -> Iterator[Hit]:
    texts: list[str] = []
    if cmd.name in _POSITIONAL_SQL:
        flags = parse_flags(cmd.words[1:], "hpancC", ("-cmd", "--cmd"))
        ops = [w.text for w in flags.operands]
        texts += ops if cmd.name == "redis-cli" else ops[1:]
        texts += flags.value("-cmd", "--cmd")
        texts += [w.text for w in cmd.words[1:] if w.text.upper() in ("FLUSHALL", "FLUSHDB")]
    else:
        short, with_sql, long_args = _SQL_OPTIONS[cmd.name]
        flags = parse_flags(cmd.words[1:], short, long_args)
        texts += flags.value(*with_sql)
    if cmd.stdin.text is not None:
        texts.append(cmd.stdin.text)
    for text in texts:
        reason = dangerous_sql(text)
        if reason:
            yield Hit("ask", f"{reason} ({cmd.name})")
            return


def piped_code(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """A shell or interpreter running code that came down a pipe or from the network."""
    name = cmd.name
    shell, interpreter = is_shell(name) or name in _LATER, is_interpreter(name)
    if not (shell or interpreter or name in ("source", ".", "eval")):
        return
    fetched = {n for w in cmd.words[1:] for n in w.subcommands} & (DOWNLOADERS | DECODERS)
    if fetched:
        yield Hit(
            "ask", f"{name} runs code produced by {', '.join(sorted(fetched))}", downgradable=False
        )
        return
    stdin = cmd.stdin
    if not stdin.piped or not _reads_stdin(cmd):
        return
    upstream = stdin.producers
    if stdin.text is not None and not upstream & (DOWNLOADERS | DECODERS):
        return  # echo ... | sh: the text itself is judged as a nested script
    if upstream & DOWNLOADERS:
        source = f"downloaded by {', '.join(sorted(upstream & DOWNLOADERS))}"
    elif upstream & DECODERS:
        source = f"decoded by {', '.join(sorted(upstream & DECODERS))}"
    elif shell:
        source = f"generated by {', '.join(sorted(upstream)) or 'an earlier command'}"
    else:
        return
    yield Hit(
        "ask",
        f"{name} runs code {source}",
        shape=f"{' '.join(sorted(upstream))} | {name}",
        downgradable=False,
    )


def _reads_stdin(cmd: Command) -> bool:
    args = [w.text for w in cmd.words[1:]]
    if cmd.name in _LATER:
        return not any(a.startswith("-f") for a in args)
    if any(
        a in ("-c", "-e", "-E", "-r", "--eval", "--command") or re.fullmatch(r"-[a-zA-Z]*c", a)
        for a in args
    ):
        return False
    operands = [a for a in args if not a.startswith("-")]
    return not operands or operands[0] in ("-", "/dev/stdin") or "-" in args or "-s" in args


def metadata(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Cloud metadata endpoints hand out machine credentials; never contact them unasked."""
    texts = [w.text for w in cmd.words[1:]]
    texts += [r.target.text for r in cmd.redirects if r.target is not None]
    if cmd.stdin.text is not None and len(cmd.stdin.text) < 20_000:
        texts.append(cmd.stdin.text)
    for text in texts:
        host = metadata_host(text)
        if host:
            yield Hit("ask", f"contacts the cloud metadata service ({host})")
            return


def metadata_host(text: str) -> str | None:
    if len(text) > 20_000:
        return None
    lowered = text.lower()
    for candidate in _candidates(lowered):
        if candidate in _METADATA_NAMES or candidate.rstrip(".") in _METADATA_NAMES:
            return candidate
        if _metadata_ip(candidate):
            return candidate
    return None


def _candidates(text: str) -> Iterator[str]:
    for token in _HOSTISH.findall(text.replace("/", " ").replace("@", " ")):
        yield token.strip("[]")
        if "://" not in token and token.count(":") == 1:
            yield token.split(":")[0]  # host:port
        yield from re.findall(r"\d{1,3}(?:\.\d{1,3}){3}", token)  # 169.254.169.254.nip.io
        for dashed in re.findall(r"\d{1,3}(?:-\d{1,3}){3}", token):  # 169-254-169-254.sslip.io
            yield dashed.replace("-", ".")
    for url in re.findall(r"[a-z][a-z0-9+.-]*://\S+", text):
        try:
            host = urlsplit(url).hostname
        except ValueError:
            continue
        if host:
            yield host


def _metadata_ip(candidate: str) -> bool:
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None
    try:
        address = ipaddress.ip_address(candidate.split("%")[0])
    except ValueError:
        if re.fullmatch(r"(0x[0-9a-f]+|\d+)(\.(0x[0-9a-f]+|\d+)){0,3}", candidate):
            try:  # inet_aton reads 2852039166, 0xa9fea9fe and 0251.0376.0251.0376
                address = ipaddress.IPv4Address(socket.inet_aton(candidate))
            except OSError:
                return False
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in net for net in _METADATA_IPS if net.version == address.version)


def process_secrets(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """Another process's environment or memory holds its secrets (the gateway's tokens)."""
    words = [*cmd.words[1:], *(r.target for r in cmd.redirects if r.target is not None)]
    for word in words:
        for place in ctx.scope.locate(word):
            if _PROC_SECRETS.fullmatch(place.path):
                yield Hit("ask", f"reads {place.path}, which can expose the gateway's secrets")
                return
    if cmd.name == "ps" and any(
        re.fullmatch(r"[a-zA-Z]*e[a-zA-Z]*", a) and "-" not in a for a in cmd.args
    ):
        yield Hit("ask", "ps e shows other processes' environments, which hold secrets")


RULES: dict[str, Rule] = {
    **dict.fromkeys((*_SQL_OPTIONS, *_POSITIONAL_SQL), sql_clients),
}
GENERIC: list[Rule] = [piped_code, metadata, process_secrets]
