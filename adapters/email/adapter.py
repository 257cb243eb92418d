"""EmailAdapter: a mailbox as a chat platform. Mail arrives over IMAP (IDLE, or polling) in the
one replica that holds the email lease and is stored before it is marked \\Seen; replies go
out over SMTP from any replica, in the mail's thread.

Each sender is a direct chat (`email:alice@example.com`) and each mail thread in it a session
(its thread id is a digest of the thread's first Message-ID).
"""

from __future__ import annotations

import logging
import ssl

from adapters.email.access import MailAccess
from adapters.email.fetching import MailFetcher
from adapters.email.files import download
from adapters.email.intake import MailIntake
from adapters.email.normalize import PLATFORM
from adapters.email.sending import MailSender
from adapters.email.settings import EmailSettings
from adapters.email.threads import MailThreads
from gateway.sdk import (
    AdapterContext,
    Capabilities,
    ChatRef,
    LeaderElection,
    MessageGone,
    Outbound,
    SentRef,
)

log = logging.getLogger(__name__)

# What the adapter sends in one mail; most submission servers take 25 MB after encoding,
# and base64 adds a third.
MAX_UPLOAD_BYTES = 18_000_000
MAX_TEXT = 200_000


class EmailAdapter:
    platform = PLATFORM
    capabilities = Capabilities(
        max_len=MAX_TEXT,
        can_edit=False,
        buttons=False,
        threads=True,
        typing=False,
        max_upload_bytes=MAX_UPLOAD_BYTES,
    )

    def __init__(self, settings: EmailSettings, ctx: AdapterContext) -> None:
        if not settings.configured:
            raise ValueError("email needs imap_host, smtp_host, username and password in [email]")
        self._settings = settings
        self._ctx = ctx
        self._tls = tls_context(settings)
        self._access = MailAccess(settings)
        self._threads = MailThreads(ctx.store, settings.thread_ttl)
        self._sender = MailSender(settings, self._threads, self._tls)
        self.intake = MailIntake(settings, ctx, self._access, self._threads)
        self._fetcher = MailFetcher(settings, self._tls, self.intake)
        self._leader: LeaderElection | None = None
        ctx.extensions.add_access_rule(self._access.rule)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        if self._ctx.store.shared:
            self._leader = LeaderElection(
                self._ctx.store,
                f"email-fetching:{self._settings.own_address}",
                self._ctx.instance_id,
                ttl=self._settings.leader_ttl,
                on_elected=self._start_fetching,
                on_deposed=self._fetcher.stop,
            )
            self._leader.start()
        else:
            await self._start_fetching()
        log.info("email ready address=%s", self._settings.own_address)

    async def stop(self) -> None:
        if self._leader is not None:
            await self._leader.stop()
        await self._fetcher.stop()

    @property
    def fetching(self) -> bool:
        return self._fetcher.running

    async def state(self) -> str:
        if self.fetching:
            problem = self._fetcher.problem
            if problem:
                return f"fetching, retrying ({problem})"
            return f"fetching ({self._fetcher.mode or 'connecting'})"
        if self._leader is not None and not self._leader.is_leader:
            return "standby: another replica fetches mail; sending works"
        return "not fetching"

    async def _start_fetching(self) -> None:
        if not self._fetcher.running:
            self._fetcher.start()
            log.info("email fetching started instance=%s", self._ctx.instance_id)

    # -- the Adapter protocol --------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        return await self._sender.send(out)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        # A sent mail cannot change; callers that must tell the outcome send a new one.
        raise MessageGone("a sent mail cannot be edited")

    async def typing(self, chat: ChatRef) -> None:
        return None

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """An attachment's bytes, fetched again from the mail on the IMAP server; raises
        AttachmentTooLarge or AttachmentUnavailable."""
        limit = min(max_bytes or self._settings.max_mail_bytes, self._settings.max_mail_bytes)
        return await download(self._settings, self._tls, file_id, limit)


def tls_context(settings: EmailSettings) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if settings.tls_ca_file:
        context.load_verify_locations(cafile=settings.tls_ca_file)
    return context
