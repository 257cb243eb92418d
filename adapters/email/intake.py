"""Mail into the gateway: each unseen mail is read, checked and stored before it is marked
\\Seen, so a replica that dies halfway leaves it unseen and the next fetch takes it again
(admission deduplicates on its Message-ID).

What is never answered (so that nobody can make the bot mail a third party): mail from a
sender not allowed, mail whose Authentication-Results do not vouch for its sender when
`require_authentication_results` is on, auto-replies and bounces, and the bot's own mail.
Those are marked seen with a log line. A mail that cannot be read is moved to the rejected
folder with a log line.
"""

from __future__ import annotations

import logging
import time

from adapters.email.access import MailAccess
from adapters.email.authresults import verdict
from adapters.email.mailbox import Mailbox
from adapters.email.normalize import PLATFORM, MalformedMail, ParsedMail, parse_mail
from adapters.email.sending import masked
from adapters.email.settings import EmailSettings
from adapters.email.threads import MailThreads
from gateway.sdk import (
    AdapterContext,
    Attachment,
    ChatKind,
    ChatRef,
    Inbound,
    Status,
    StoreUnavailable,
    UserRef,
)

log = logging.getLogger(__name__)


class MailIntake:
    def __init__(
        self,
        settings: EmailSettings,
        ctx: AdapterContext,
        access: MailAccess,
        threads: MailThreads,
    ) -> None:
        self._settings = settings
        self._ctx = ctx
        self._access = access
        self._threads = threads

    async def take(self, mailbox: Mailbox, uid: int) -> bool:
        """Handle one mail; False when it could not be stored (it stays unseen)."""
        settings = self._settings
        size = await mailbox.size(uid)
        if size is not None and size > settings.max_mail_bytes:
            return await self._reject(mailbox, uid, f"{size} bytes, over email.max_mail_bytes")
        fetched = await mailbox.fetch(uid)
        if fetched is None:
            return True  # gone meanwhile (another client moved it)
        try:
            mail = parse_mail(fetched.raw)
        except MalformedMail as exc:
            return await self._reject(mailbox, uid, str(exc))
        ignored = self._ignored(mail)
        if ignored:
            log.info("mail ignored uid=%d from=%s why=%s", uid, masked(mail.sender), ignored)
            await mailbox.mark_seen(uid)
            return True
        try:
            inbound = await self._inbound(mail, f"{mailbox.uidvalidity}.{uid}")
            result = await self._ctx.submit(inbound)
        except StoreUnavailable as exc:
            log.warning("mail not stored uid=%d error=%s", uid, exc)
            return False
        except Exception:
            log.exception("mail not taken uid=%d", uid)
            return False
        if result.status is Status.UNAVAILABLE:
            return False
        await mailbox.mark_seen(uid)
        return True

    def _ignored(self, mail: ParsedMail) -> str:
        """Why this mail gets no answer at all (empty: it is for the bot)."""
        if mail.sender == self._settings.own_address:
            return "sent by the bot's own address"
        if mail.automatic:
            return "an automatic mail (auto-reply, bounce or list)"
        if self._settings.require_authentication_results:
            found = verdict(
                mail.auth_results, self._settings.trusted_authserv_id, mail.sender_domain
            )
            if not found.trusted:
                return f"sender not authenticated ({found.why})"
        if not self._access.allows(mail.sender):
            return "sender not in email.allowed_senders"
        return ""

    async def _inbound(self, mail: ParsedMail, handle: str) -> Inbound:
        thread_id, new_thread = await self._threads.thread_of(mail)
        await self._threads.received(mail.sender, thread_id, mail)
        chat = ChatRef(
            platform=PLATFORM, chat_id=mail.sender, thread_id=thread_id, kind=ChatKind.DIRECT
        )
        sender = UserRef(
            platform=PLATFORM, user_id=mail.sender, display_name=mail.sender_name or mail.sender
        )
        attachments = tuple(
            Attachment(
                kind=part.kind,
                file_id=f"{handle}.{part.index}",
                name=part.name,
                size=part.size,
                mime_type=part.mime_type,
            )
            for part in mail.attachments
        )
        return Inbound(
            event_id=mail.message_id or f"imap-{handle}",
            chat=chat,
            sender=sender,
            text=mail.text_for_model(new_thread=new_thread),
            message_id=mail.message_id or None,
            mentioned=True,
            attachments=attachments,
            received_at=time.time(),
        )

    async def _reject(self, mailbox: Mailbox, uid: int, why: str) -> bool:
        folder = self._settings.rejected_folder
        log.warning("mail rejected uid=%d folder=%s why=%s", uid, folder, why)
        await mailbox.move(uid, folder)
        return True
