"""Real mail servers for the email tests: a private Dovecot (IMAP, its own config directory,
a passwd-file user, a free port on 127.0.0.1, no system service) and an in-process aiosmtpd
that keeps the mail the bot sends (after AUTH, as a submission server would)."""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import grp
import os
import pwd
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

DOVECOT = "/usr/sbin/dovecot"
PASSWORD = "bot-secret-pw"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Dovecot:
    """`dovecot -F` with a config of its own in a new directory; one mail user (`user`)."""

    def __init__(self, user: str) -> None:
        # Not under pytest's tmp_path (0700): Dovecot's own users must reach it as root.
        self.root = Path(tempfile.mkdtemp(prefix="cgt-dovecot-", dir="/tmp"))
        self.root.chmod(0o755)
        self.user = user
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> None:
        config = self._write_config()
        self._process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: stop() ends the imap processes too
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                err = self._process.stderr.read().decode() if self._process.stderr else ""
                raise RuntimeError(f"dovecot exited: {err}{self.log()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock,
            ):
                if sock.recv(100).startswith(b"* OK"):
                    return
            time.sleep(0.05)
        raise RuntimeError(f"dovecot did not answer on port {self.port}: {self.log()}")

    def stop(self) -> None:
        """Stop the master and every process it started (IMAP sessions outlive the master)."""
        process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _write_config(self) -> Path:
        for sub in ("run", "state", "mail"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        me = pwd.getpwuid(os.geteuid())
        if os.geteuid() == 0:
            # Dovecot will not run its login and internal processes, nor mail, as root.
            owner = pwd.getpwnam("dovecot")
            login, internal = "dovenull", "dovecot"
            for path in (self.root / "mail", self.root / "state"):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            self.root.chmod(0o755)
        else:
            owner, login, internal = me, me.pw_name, me.pw_name
        (self.root / "users").write_text(
            f"{self.user}:{{PLAIN}}{PASSWORD}:{owner.pw_uid}:{owner.pw_gid}::"
            f"{self.root}/mail/{self.user}::\n"
        )
        config = self.root / "dovecot.conf"
        config.write_text(
            f"""
base_dir = {self.root}/run
state_dir = {self.root}/state
instance_name = chatgate-test-{self.port}
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
log_path = {self.root}/dovecot.log
default_login_user = {login}
default_internal_user = {internal}
default_internal_group = {grp.getgrgid(pwd.getpwnam(internal).pw_gid).gr_name}
first_valid_uid = 0
mail_location = maildir:{self.root}/mail/%u
# IDLE notices new mail through inotify; when the machine is out of inotify instances
# it checks on this interval instead (30 s by default, longer than a test waits).
mailbox_idle_check_interval = 1 secs
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {self.root}/users
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {self.root}/users
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"""
        )
        return config


@dataclass
class Outgoing:
    """The mail the bot sent, as the SMTP server received it."""

    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage

    @property
    def text(self) -> str:
        body = self.message.get_body(preferencelist=("plain",))
        return str(body.get_content()) if body is not None else ""

    def header(self, name: str) -> str:
        return str(self.message.get(name) or "")


@dataclass
class SmtpSink:
    """aiosmtpd on a free port: AUTH PLAIN/LOGIN with one account, keeps every mail."""

    username: str
    password: str
    # (certificate, key): STARTTLS required, and AUTH only after it.
    tls: tuple[Path, Path] | None = None
    received: list[Outgoing] = field(default_factory=list)
    port: int = 0
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _controller: Any = None

    def start(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        sink = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                message = email.message_from_bytes(envelope.content, policy=email.policy.default)
                assert isinstance(message, EmailMessage)
                sink.received.append(Outgoing(envelope.mail_from, list(envelope.rcpt_tos), message))
                loop.call_soon_threadsafe(sink.arrived.set)
                return "250 OK"

        def authenticator(
            server: Any, session: Any, envelope: Any, mechanism: str, data: Any
        ) -> Any:
            ok = (
                data is not None
                and data.login.decode() == sink.username
                and data.password.decode() == sink.password
            )
            return AuthResult(success=ok)

        loop = asyncio.get_running_loop()
        self.port = free_port()
        tls: dict[str, Any] = {"auth_require_tls": False}
        if self.tls is not None:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.tls)
            tls = {"tls_context": context, "require_starttls": True, "auth_require_tls": True}
        self._controller = Controller(
            Handler(),
            hostname="127.0.0.1",
            port=self.port,
            authenticator=authenticator,
            auth_required=True,
            **tls,
        )
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()

    async def wait_for(self, match: Callable[[Outgoing], bool], within: float = 20.0) -> Outgoing:
        deadline = asyncio.get_running_loop().time() + within
        while True:
            for mail in self.received:
                if match(mail):
                    return mail
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                got = [(m.rcpt_tos, m.header("Subject"), m.text[:200]) for m in self.received]
                raise AssertionError(f"no such mail within {within} s; received: {got}")
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), min(remaining, 0.5))


def dovecot_missing() -> str:
    """Why the email tests cannot run here (empty: they can)."""
    if not Path(DOVECOT).exists() or shutil.which("doveconf") is None:
        return "Dovecot is not installed (apt-get install dovecot-imapd; tests/run.sh does it)"
    return ""
