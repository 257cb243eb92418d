"""Attachment bytes on demand: the mail is fetched again from the folder (BODY.PEEK: no flag
changes) by the UID in the attachment's handle, checked against the folder's UIDVALIDITY, and
the part picked by its position. Any replica can do this; the mail stays where it was."""

from __future__ import annotations

import email
import email.policy
import ssl
from email.message import EmailMessage

from adapters.email.mailbox import Mailbox, MailboxError
from adapters.email.normalize import attachment_parts, part_bytes
from adapters.email.settings import EmailSettings
from gateway.sdk import AttachmentUnavailable
from gateway.sdk.media import too_large


async def download(
    settings: EmailSettings, tls: ssl.SSLContext, file_id: str, max_bytes: int
) -> bytes:
    try:
        uidvalidity, uid, index = (int(part) for part in file_id.split("."))
    except ValueError:
        raise AttachmentUnavailable("not an email attachment handle") from None
    mailbox = Mailbox(settings, tls)
    try:
        await mailbox.open()
        if mailbox.uidvalidity != uidvalidity:
            raise AttachmentUnavailable("the mail folder was recreated; the mail is gone")
        fetched = await mailbox.fetch(uid)
    except MailboxError as exc:
        raise AttachmentUnavailable(str(exc)) from None
    finally:
        await mailbox.close()
    if fetched is None:
        raise AttachmentUnavailable("the mail is no longer in the folder")
    message = email.message_from_bytes(fetched.raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    parts = attachment_parts(message)
    if index >= len(parts):
        raise AttachmentUnavailable("the mail has no such attachment")
    data = part_bytes(parts[index])
    if len(data) > max_bytes:
        raise too_large(len(data), max_bytes)
    return data
