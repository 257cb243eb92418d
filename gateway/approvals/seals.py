"""Seals on the store entries that decide what runs and who decides: approval requests,
answers, standing grants and their epochs, and the web pages' browser sessions and sign-in
links carry an HMAC under a key only the gateway process holds, so a command that can write
the store cannot forge, alter or move one. An entry that does not verify is ignored, logged
once as tampering and counted (`chatgate_approvals_tampered_total`, by kind).

The key is `approvals.secret` when set (the same on every replica), else a random key in
`{data_dir}/approvals.key` (mode 0600) made on first start. Commands never see either: the
sandbox hides the data directory, a root gateway runs local commands as another user, and
the environment of anything the gateway starts is an allowlist.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

from gateway.config import ConfigError, Settings
from gateway.runtime.metrics import Metrics

log = logging.getLogger(__name__)

KEY_FILE = "approvals.key"
_MIN_SECRET = 16
_REPORTED_MAX = 10_000  # entries remembered as already reported (then the memory starts over)


class EntrySigner:
    """Seals JSON values for one place in the store and opens only what it sealed there."""

    def __init__(self, key: bytes, metrics: Metrics | None = None) -> None:
        if len(key) < 16:
            raise ValueError("the sealing key must be at least 16 bytes")
        self._key = key
        self._metrics = metrics
        self._reported: set[tuple[str, str]] = set()

    def seal(self, kind: str, where: str, value: Any) -> str:
        """`value` (JSON-compatible) as stored at `where` (the store key, with the hash field
        when there is one); `kind` names what it is ("grant", "approvals answer" ...)."""
        return json.dumps(
            {"v": value, "mac": self._mac(kind, where, value)},
            separators=(",", ":"),
            ensure_ascii=False,
        )

    def open(self, kind: str, where: str, raw: str | None) -> Any:
        """The value sealed at `where`, or None when there is none or it does not verify
        (reported once as tampering)."""
        if raw is None:
            return None
        try:
            envelope = json.loads(raw)
            value, mac = envelope["v"], envelope["mac"]
            ok = (
                isinstance(envelope, dict)
                and len(envelope) == 2
                and isinstance(mac, str)
                and hmac.compare_digest(mac, self._mac(kind, where, value))
            )
        except (ValueError, TypeError, KeyError):
            ok = False
        if ok:
            return value
        self.report(kind, where)
        return None

    def tag(self, kind: str, name: str) -> str:
        """A name nobody without the key can compute (where an answer will be written)."""
        data = f"tag\0{kind}\0{name}".encode()
        return hmac.new(self._key, data, hashlib.sha256).hexdigest()[:32]

    def report(self, kind: str, where: str) -> None:
        if (kind, where) in self._reported:
            return
        if len(self._reported) >= _REPORTED_MAX:
            self._reported.clear()
        self._reported.add((kind, where))
        log.warning("tampered store entry ignored kind=%s key=%r", kind, where[:200])
        if self._metrics is not None:
            self._metrics.inc("approvals_tampered_total", kind=kind)

    def _mac(self, kind: str, where: str, value: Any) -> str:
        canonical = json.dumps(
            [kind, where, value], sort_keys=True, separators=(",", ":"), allow_nan=False
        )
        return hmac.new(self._key, canonical.encode(), hashlib.sha256).hexdigest()


def signer_for(settings: Settings, metrics: Metrics | None = None) -> EntrySigner:
    """The gateway's signer; raises ConfigError when no key is usable."""
    key = load_key(settings)
    if settings.redis.enabled and not settings.approvals.secret.get_secret_value():
        log.warning("approvals key: %s", REPLICA_NOTE)
    return EntrySigner(key, metrics)


REPLICA_NOTE = (
    "sealed with this process's own key file; with several replicas set approvals.secret "
    "(CHATGATE_APPROVALS__SECRET), the same on each, or they refuse each other's approvals"
)


def load_key(settings: Settings) -> bytes:
    """The sealing key; raises ConfigError (one sentence with the fix) when none is usable."""
    secret = settings.approvals.secret.get_secret_value()
    if secret:
        if len(secret) < _MIN_SECRET:
            raise ConfigError(
                [
                    f"approvals.secret is shorter than {_MIN_SECRET} characters; use a long "
                    "random value (openssl rand -hex 32), the same on every replica."
                ]
            )
        return hashlib.sha256(b"chatgate approvals key\0" + secret.encode()).digest()
    return key_from_file(key_path(settings))


def key_path(settings: Settings) -> Path:
    return settings.data_dir.expanduser().resolve() / KEY_FILE


def key_from_file(path: Path) -> bytes:
    """Read the key file, making it first (0600, atomically) when it does not exist."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not path.exists():
            _create(path)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd) as fh:
            info = os.fstat(fh.fileno())
            text = fh.read().strip()
    except OSError as exc:
        raise ConfigError(
            [
                f"the approvals key {path} cannot be read or made ({exc.strerror or exc}); "
                "make the data directory writable by the gateway's user, or set "
                "approvals.secret."
            ]
        ) from None
    if info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ConfigError(
            [
                f"the approvals key {path} must belong to the gateway's user and be readable "
                f"by it alone: chown it and run `chmod 600 {path}`."
            ]
        )
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) < 16:
        raise ConfigError(
            [f"the approvals key {path} is damaged; delete it (a new one is made at start)."]
        )
    return key


def _create(path: Path) -> None:
    # Written aside and linked into place: a second process starting at the same moment
    # either links first or reads the finished file, never a half-written one.
    fd, tmp = tempfile.mkstemp(prefix=".approvals-key-", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)


def key_problem(settings: Settings) -> str | None:
    """For doctor: why no key is usable, or None. Makes nothing (doctor may run as another
    user than the gateway, and a key file it made would then be unreadable to the gateway)."""
    if settings.approvals.secret.get_secret_value():
        try:
            load_key(settings)
        except ConfigError as exc:
            return str(exc)
        return None
    path = key_path(settings)
    if path.exists():
        try:
            key_from_file(path)
        except ConfigError as exc:
            return str(exc)
        return None
    parent = next((p for p in (path.parent, *path.parents) if p.exists()), Path("/"))
    if not os.access(parent, os.W_OK | os.X_OK):
        return (
            f"no approvals key: {path} does not exist and {parent} is not writable; make the "
            "data directory writable by the gateway's user, or set approvals.secret."
        )
    return None
