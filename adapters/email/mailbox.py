"""One IMAP connection to the bot's folder (aioimaplib): unseen mail by UID, \\Seen set after
the mail is stored, unreadable mail moved to the rejected folder, and IDLE to wait for more.

aioimaplib has no type hints; this module is the only one that touches it, and it turns its
`Response` lines into plain values.
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

import aioimaplib

from adapters.email.settings import EmailSettings

_UIDVALIDITY = re.compile(rb"\[UIDVALIDITY (\d+)\]")
_UIDNEXT = re.compile(rb"\[UIDNEXT (\d+)\]")
_FETCH_UID = re.compile(rb"\bUID (\d+)\b")
_LOGOUT_SECONDS = 5.0  # a polite goodbye; the connection is closed after it either way


class MailboxError(Exception):
    """The IMAP server refused a step or the connection failed; the message says which."""


@dataclass(frozen=True)
class FetchedMail:
    uid: int
    raw: bytes


class Mailbox:
    def __init__(self, settings: EmailSettings, tls: ssl.SSLContext) -> None:
        self._settings = settings
        self._tls = tls
        self._client: aioimaplib.IMAP4 | None = None
        self._lost = False
        self.uidvalidity = 0

    @property
    def can_idle(self) -> bool:
        return self._client is not None and self._client.has_capability("IDLE")

    async def open(self, folder: str | None = None) -> None:
        settings = self._settings
        assert settings.password is not None
        timeout = settings.timeout
        try:
            if settings.imap_tls:
                client = aioimaplib.IMAP4_SSL(
                    host=settings.imap_host,
                    port=settings.imap_port,
                    timeout=timeout,
                    ssl_context=self._tls,
                )
            else:
                client = aioimaplib.IMAP4(
                    host=settings.imap_host, port=settings.imap_port, timeout=timeout
                )
            self._client = client
            client.protocol.conn_lost_cb = lambda _exc: self._connection_lost(client)
            await client.wait_hello_from_server()
            login = await client.login(settings.username, settings.password.get_secret_value())
        except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
            await self.close()
            raise MailboxError(
                f"cannot reach the IMAP server {settings.imap_host}:{settings.imap_port} "
                f"({type(exc).__name__})"
            ) from None
        if login.result != "OK":
            await self.close()
            raise MailboxError(
                "the IMAP server refused the login: check email.username and email.password"
            )
        await self.select(folder or settings.folder)

    async def select(self, folder: str) -> int:
        """Select `folder`; returns its UIDNEXT, which grows with every mail that arrives.

        SELECT is also how the fetch loop learns of mail that came while it searched:
        aioimaplib drops an EXISTS the server sends during SEARCH or FETCH, and the server
        does not send it again, while SELECT's own answer carries the folder's state.
        """
        # SELECT even to read: aioimaplib allows UID FETCH only in the SELECTED state, and
        # BODY.PEEK leaves the flags as they are.
        response = await self._call(self._need().select(folder), f"select {folder}")
        uidnext = 0
        for line in response.lines:
            text = bytes(line)
            if found := _UIDVALIDITY.search(text):
                self.uidvalidity = int(found.group(1))
            if found := _UIDNEXT.search(text):
                uidnext = int(found.group(1))
        return uidnext

    async def unseen(self) -> list[int]:
        response = await self._call(self._need().uid_search("UNSEEN"), "search")
        first = bytes(response.lines[0]) if response.lines else b""
        return sorted(int(uid) for uid in first.split() if uid.isdigit())

    async def size(self, uid: int) -> int | None:
        response = await self._call(
            self._need().uid("fetch", str(uid), "(RFC822.SIZE)"), "fetch size"
        )
        for line in response.lines:
            found = re.search(rb"RFC822\.SIZE (\d+)", bytes(line))
            if found:
                return int(found.group(1))
        return None

    async def fetch(self, uid: int) -> FetchedMail | None:
        """The whole mail, without setting \\Seen (BODY.PEEK); None when it is gone."""
        response = await self._call(
            self._need().uid("fetch", str(uid), "(UID BODY.PEEK[])"), "fetch"
        )
        lines = response.lines
        for index, line in enumerate(lines[:-1]):
            if (
                isinstance(line, bytes)
                and b"FETCH" in line
                and isinstance(lines[index + 1], bytearray)
            ):
                found = _FETCH_UID.search(line)
                if found is None or int(found.group(1)) == uid:
                    return FetchedMail(uid, bytes(lines[index + 1]))
        return None

    async def mark_seen(self, uid: int) -> None:
        await self._call(self._need().uid("store", str(uid), "+FLAGS.SILENT (\\Seen)"), "store")

    async def move(self, uid: int, folder: str) -> None:
        """Move one mail to `folder` (made when missing): MOVE, or COPY and expunge."""
        client = self._need()
        try:
            await client.create(folder)  # its answer is not checked: NO [ALREADYEXISTS] is fine
        except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
            raise MailboxError(f"IMAP create {folder} failed ({type(exc).__name__})") from None
        if client.has_capability("MOVE"):
            await self._call(client.uid("move", str(uid), folder), "move")
            return
        await self._call(client.uid("copy", str(uid), folder), "copy")
        await self._call(client.uid("store", str(uid), "+FLAGS.SILENT (\\Deleted \\Seen)"), "store")
        if client.has_capability("UIDPLUS"):
            await self._call(client.uid("expunge", str(uid)), "expunge")
        else:
            await self._call(client.expunge(), "expunge")

    async def wait_for_mail(self, seconds: float) -> None:
        """IDLE until the server announces a change or `seconds` pass; raises MailboxError
        when the connection is lost meanwhile."""
        client = self._need()
        try:
            idle = await client.idle_start(timeout=seconds)
            try:
                while not self._lost:
                    pushed = await client.wait_server_push(timeout=seconds + 5)
                    if pushed == aioimaplib.STOP_WAIT_SERVER_PUSH or _announces_mail(pushed):
                        break
            finally:
                if not self._lost:
                    client.idle_done()
                    await asyncio.wait_for(idle, self._settings.timeout)
        except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
            raise MailboxError(f"IMAP IDLE failed ({type(exc).__name__})") from None
        if self._lost:
            raise MailboxError("the IMAP server closed the connection")

    def _connection_lost(self, client: aioimaplib.IMAP4) -> None:
        self._lost = True
        # Wake an IDLE that waits for the server: it will not say anything any more.
        client.protocol.idle_queue.put_nowait(aioimaplib.STOP_WAIT_SERVER_PUSH)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if not self._lost and client.get_state() in ("AUTH", "SELECTED"):
                await asyncio.wait_for(client.logout(), _LOGOUT_SECONDS)
        except (OSError, TimeoutError, aioimaplib.AioImapException):
            pass
        finally:
            transport = getattr(client.protocol, "transport", None)
            if transport is not None:
                transport.close()

    def _need(self) -> aioimaplib.IMAP4:
        if self._client is None:
            raise MailboxError("not connected")
        return self._client

    async def _call(self, step: Awaitable[Any], what: str) -> Any:
        try:
            response = await step
        except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
            raise MailboxError(f"IMAP {what} failed ({type(exc).__name__})") from None
        if response.result != "OK":
            detail = bytes(response.lines[-1]).decode(errors="replace") if response.lines else ""
            raise MailboxError(f"IMAP {what} refused: {detail[:200]}")
        return response


def _announces_mail(pushed: object) -> bool:
    lines = pushed if isinstance(pushed, list) else [pushed]
    return any(b"EXISTS" in bytes(line) for line in lines if isinstance(line, (bytes, bytearray)))
