"""Secrets leaving the machine: which files hold secrets (keys, cloud credentials, `.env`,
the gateway's own config and store), which commands read them, and which commands send
what they are given to the network (upload flags, pipes, sockets, DNS names)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass

from tools.shell.safety.context import Context, Rule
from tools.shell.safety.model import Command, Hit, Word
from tools.shell.safety.names import DOWNLOADERS, is_interpreter, is_shell
from tools.shell.safety.shape import show_path

# Credential stores under a home directory; reading them is enough to leak them.
_SECRET_DIRS = (".ssh", ".gnupg", ".password-store", ".config/gcloud", ".azure", ".aws")
_SECRET_FILES = (
    ".kube/config",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    ".npmrc",
    ".pypirc",
    ".config/gh/hosts.yml",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".config/rclone/rclone.conf",
    ".s3cfg",
    ".boto",
    ".local/share/keyrings",
)
_PUBLIC_IN_SECRET_DIRS = frozenset(
    {"known_hosts", "known_hosts.old", "authorized_keys", "config", "environment"}
)
_KEY_NAME = re.compile(
    r"id_(rsa|dsa|ecdsa|ed25519)(_sk)?|.*\.(key|p12|pfx|kdbx|keystore|jks)|.*(key|priv).*\.pem|"
    r"\.htpasswd|ssh_host_.*_key|credentials(\.json)?"
)
_ENV_FILE = re.compile(r"\.env(\.(?!example|sample|template|dist|defaults)[\w.-]+)?|.*\.env")
_SYSTEM_SECRETS = re.compile(
    r"/etc/(g?shadow|ssh/ssh_host_[^/]*_key|sudoers)|/(var/)?run/secrets(/.*)?|"
    r"/proc/[^/]+/(task/[^/]+/)?environ"
)
# Programs that only use a key (ssh -i) or never look inside a file (ls, chmod).
_USES_OR_IGNORES = frozenset(
    {
        "ssh",
        "ssh-add",
        "ssh-keygen",
        "ssh-copy-id",
        "ssh-agent",
        "git",
        "gpg",
        "gpg2",
        "kubectl",
        "helm",
        "aws",
        "gcloud",
        "az",
        "docker",
        "terraform",
        "ansible",
        "ansible-playbook",
        "ls",
        "stat",
        "test",
        "[",
        "file",
        "du",
        "touch",
        "mkdir",
        "chmod",
        "chown",
        "chgrp",
        "rm",
        "rmdir",
        "unlink",
        "shred",
        "realpath",
        "readlink",
        "basename",
        "dirname",
        "cd",
        "pushd",
        "namei",
        "lsattr",
        "chattr",
        "find",
        "echo",
        "printf",
        "wc",
        "mv",
        "ln",
    }
)
# Options whose value is a key or configuration the program uses, not data it sends.
_SSH_KEYS = frozenset({"-i", "-F", "-S"})
_KEY_OPTIONS: dict[str, frozenset[str]] = {
    "curl": frozenset(
        {"--cert", "-E", "--key", "--cacert", "--capath", "--netrc-file", "-K", "--config"}
    ),
    "wget": frozenset({"--certificate", "--private-key", "--ca-certificate", "--config"}),
    "scp": _SSH_KEYS,
    "sftp": _SSH_KEYS,
    "sshfs": _SSH_KEYS,
}
# Everything that downloads can also send; these send too (uploads, mail, object stores).
NET_SINKS = DOWNLOADERS | frozenset(
    {
        "sftp",
        "rsync",
        "lftp",
        "smbclient",
        "openssl",
        "mail",
        "mailx",
        "sendmail",
        "mutt",
        "aws",
        "gsutil",
        "rclone",
        "gh",
        "glab",
        "s3cmd",
        "mc",
        "POST",
    }
)
DNS_TOOLS = frozenset(
    {"dig", "nslookup", "host", "drill", "delv", "kdig", "ping", "ping6", "getent", "whois"}
)
_RAW_SOCKET = re.compile(r"/dev/(tcp|udp)/")
# Every secret path above contains one of these; words without any are skipped quickly.
_SECRETISH = re.compile(
    r"\.(ssh|gnupg|password-store|config|azure|aws|kube|docker|netrc|git-credentials|pgpass|"
    r"my\.cnf|npmrc|pypirc|vault-token|terraform\.d|s3cfg|boto|local|env|htpasswd)|\.env|"
    r"id_(rsa|dsa|ecdsa|ed25519)|key|priv|\.p12|\.pfx|\.kdbx|\.jks|credentials|shadow|"
    r"sudoers|secrets|environ|\$"
)


@dataclass(frozen=True)
class Secret:
    label: str  # how a reason names it: "~/.ssh/id_ed25519"
    exposed_by_reading: bool  # reading it alone leaks it (`.env` only matters when sent)


def secret_at(path: str, ctx: Context, outside: bool = True) -> Secret | None:
    """Whether the (normalised) path holds secrets, and whether reading it alone leaks them:
    inside the workspace the model may read any file anyway, so only sending it out counts."""
    guarded = ctx.state.owner(path)
    if guarded is not None:
        return Secret(f"{show_path(path)} ({guarded.label})", True) if guarded.secret else None
    exposed = outside and not ctx.state.in_workspace(path)
    if _SYSTEM_SECRETS.fullmatch(path):
        return Secret(path, exposed)
    name = posixpath.basename(path)
    padded = f"/{path}/"
    public = name in _PUBLIC_IN_SECRET_DIRS or name.endswith(".pub")
    if not public and any(f"/{folder}/" in padded for folder in _SECRET_DIRS):
        return Secret(show_path(path), exposed)
    if any(f"/{f}/" in padded for f in _SECRET_FILES) or (_KEY_NAME.fullmatch(name) and not public):
        return Secret(show_path(path), exposed)
    if _ENV_FILE.fullmatch(name):
        return Secret(show_path(path), False)
    return None


def secrets_read(cmd: Command, ctx: Context) -> list[Secret]:
    """Secret files whose content this command reads (operands, @file uploads, `<` input)."""
    words = [r.target for r in cmd.redirects if r.op in ("<", "<>") and r.target is not None]
    if cmd.words and cmd.name not in _USES_OR_IGNORES:
        keys = _KEY_OPTIONS.get(cmd.name, frozenset())
        skip = False
        for word in cmd.words[1:]:
            if skip:
                skip = False
            elif word.text in keys:
                skip = True
            elif not word.text.startswith(tuple(o + "=" for o in keys)):
                words.append(word)
    found: list[Secret] = []
    names = ctx.state.names
    for word in words:
        if not (_SECRETISH.search(word.text) or (names and _may_be_guarded(word.text, names))):
            continue  # cheap test first: most words name nothing secret
        for text in _file_forms(word.text):
            for place in ctx.scope.locate(Word.literal(text)):
                secret = secret_at(place.path, ctx, place.outside)
                if secret is not None and secret not in found:
                    found.append(secret)
    return found


def _may_be_guarded(text: str, names: frozenset[str]) -> bool:
    return "/" in text or text.startswith((".", "~")) or any(n in text for n in names)


def _file_forms(text: str) -> Iterator[str]:
    """The file a word names: `x`, `@x` (curl -d), `f=@x` / `f=<x` (curl -F), `--opt=x`."""
    if not text or re.search(r"\s", text):
        return
    m = re.match(r"(?:[\w.-]*=)?[@<]?(.+)", text) if not text.startswith("-") else None
    if text.startswith("--") and "=" in text:
        m = re.match(r"--[\w-]+=[@<]?(.+)", text)
    if m:
        yield m.group(1)


def exfiltration(cmd: Command, ctx: Context) -> Iterator[Hit]:
    read = secrets_read(cmd, ctx)
    sink = cmd.name in NET_SINKS or any(
        r.target is not None and _RAW_SOCKET.match(r.target.text) for r in cmd.redirects
    )
    carried = sorted(cmd.stdin.secrets | cmd.secrets | {s.label for s in read})
    if sink and carried:
        yield Hit("ask", f"sends {', '.join(carried[:3])} to the network ({cmd.name or '>'})")
        return
    if cmd.name in DNS_TOOLS and any(w.subcommands for w in cmd.words[1:]):
        yield Hit("ask", f"{cmd.name} looks up a name built at run time (DNS can carry data out)")
        return
    exposed = [s.label for s in read if s.exposed_by_reading]
    if exposed:
        yield Hit("ask", f"reads {', '.join(exposed[:3])}; its content would reach the model")


def remote_shell(cmd: Command, ctx: Context) -> Iterator[Hit]:
    """A shell or program wired to a network socket: whoever is at the other end runs it."""
    args = cmd.args
    if cmd.name in ("nc", "ncat", "netcat") and any(
        a in ("-e", "-c", "--exec", "--sh-exec", "--lua-exec") or re.fullmatch(r"-\w*[ec]", a)
        for a in args
    ):
        yield Hit("ask", f"{cmd.name} runs a program for whoever connects (a remote shell)")
    elif cmd.name == "socat" and any(re.match(r"(?i)(exec|system):", a) for a in args):
        yield Hit("ask", "socat runs a program for whoever connects (a remote shell)")
    elif (is_shell(cmd.name) or is_interpreter(cmd.name) or cmd.name == "exec") and any(
        r.target is not None and _RAW_SOCKET.match(r.target.text) for r in cmd.redirects
    ):
        yield Hit("ask", f"{cmd.name} opens a network socket from the shell (a remote shell)")


GENERIC: list[Rule] = [exfiltration, remote_shell]
