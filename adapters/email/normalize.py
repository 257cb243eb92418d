"""A raw mail as the gateway reads it: sender, thread headers, the person's text, attachments.

`parse_mail` raises `MalformedMail` for a mail that cannot be read (no sender address,
headers that do not parse); the intake moves such a mail to the rejected folder.
"""

from __future__ import annotations

import email
import email.policy
import re
from dataclasses import dataclass
from email.message import EmailMessage, Message
from email.utils import getaddresses

from adapters.email.bodytext import MailText, html_to_text, split_mail_text
from gateway.sdk import AttachmentKind

PLATFORM = "email"
_MSGID = re.compile(r"<[^<>\s]+>")
# "approve ID", "deny ID reason" (or the chat form with a slash) as the first line.
_DECISION = re.compile(r"^/?(approve|deny)\s+([A-Za-z0-9]{4,32})\b(.*)$", re.IGNORECASE)


class MalformedMail(ValueError):
    """The mail cannot be read; the message says why (for the log line)."""


@dataclass(frozen=True)
class MailPart:
    index: int  # position among the mail's attachments, the handle `files.py` fetches by
    name: str
    mime_type: str
    size: int

    @property
    def kind(self) -> AttachmentKind:
        major = self.mime_type.partition("/")[0]
        return {
            "image": AttachmentKind.IMAGE,
            "audio": AttachmentKind.AUDIO,
            "video": AttachmentKind.VIDEO,
        }.get(major, AttachmentKind.DOCUMENT)


@dataclass(frozen=True)
class ParsedMail:
    sender: str  # the From: address, lower case
    sender_name: str
    message_id: str  # "<...>"; empty when the mail has none
    in_reply_to: str
    references: tuple[str, ...]
    subject: str
    text: MailText
    attachments: tuple[MailPart, ...]
    auth_results: tuple[str, ...]  # Authentication-Results headers, topmost first
    automatic: bool  # an auto-reply, bounce or list mail (never answered: no mail loops)

    @property
    def sender_domain(self) -> str:
        return self.sender.rpartition("@")[2]

    def text_for_model(self, *, new_thread: bool) -> str:
        """What the turn reads: a decision or command alone; else the text (with the subject
        on a thread's first mail)."""
        first = self.text.own.split("\n", 1)[0].strip()
        decision = _DECISION.match(first)
        if decision:
            verb, request_id, reason = decision.groups()
            return f"/{verb.lower()} {request_id} {reason.strip()}".strip()
        if first.startswith("/"):
            return first
        body = self.text.for_model()
        if new_thread and self.subject:
            return f"Subject: {self.subject}\n\n{body}".strip()
        return body


def parse_mail(raw: bytes) -> ParsedMail:
    try:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        return _read(message)
    except MalformedMail:
        raise
    except Exception as exc:  # the email package raises many kinds on broken input
        raise MalformedMail(f"unreadable mail ({type(exc).__name__}: {exc})") from None


def _read(message: EmailMessage) -> ParsedMail:
    if not message.keys():
        raise MalformedMail("no headers")
    senders = [a for _, a in getaddresses(message.get_all("From", [])) if "@" in a]
    if len(senders) != 1:
        raise MalformedMail("no single sender address in From:")
    name = getaddresses(message.get_all("From", []))[0][0]
    attachments = tuple(
        MailPart(
            index,
            part.get_filename() or f"attachment-{index + 1}",
            part.get_content_type(),
            len(_payload(part)),
        )
        for index, part in enumerate(attachment_parts(message))
    )
    return ParsedMail(
        sender=senders[0].strip().lower(),
        sender_name=str(name or ""),
        message_id=_first_id(message.get("Message-ID")),
        in_reply_to=_first_id(message.get("In-Reply-To")),
        references=tuple(_MSGID.findall(str(message.get("References") or ""))),
        subject=" ".join(str(message.get("Subject") or "").split()),
        text=split_mail_text(_body_text(message)),
        attachments=attachments,
        auth_results=tuple(str(h) for h in message.get_all("Authentication-Results", [])),
        automatic=_automatic(message),
    )


def attachment_parts(message: EmailMessage) -> list[Message]:
    """The mail's files in a fixed order (the same bytes give the same list)."""
    body = message.get_body(preferencelist=("plain", "html"))
    found: list[Message] = []
    for part in message.walk():
        if part.is_multipart() or part is body:
            continue
        disposition = part.get_content_disposition()
        if (
            disposition == "attachment"
            or part.get_filename()
            or part.get_content_maintype() in ("image", "audio", "video", "application")
        ):
            found.append(part)
    return found


def part_bytes(part: Message) -> bytes:
    return _payload(part)


def _payload(part: Message) -> bytes:
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else b""


def _body_text(message: EmailMessage) -> str:
    body = message.get_body(preferencelist=("plain", "html"))
    if body is None:
        return ""
    assert isinstance(body, EmailMessage)
    content = body.get_content()
    text = content if isinstance(content, str) else content.decode("utf-8", "replace")
    return html_to_text(text) if body.get_content_subtype() == "html" else text


def _first_id(value: object) -> str:
    found = _MSGID.search(str(value or ""))
    return found.group(0) if found else ""


def _automatic(message: EmailMessage) -> bool:
    submitted = str(message.get("Auto-Submitted") or "no").strip().lower()
    precedence = str(message.get("Precedence") or "").strip().lower()
    return (
        submitted != "no"
        or precedence in ("bulk", "junk", "list", "auto_reply")
        or message.get("List-Id") is not None
        or not str(message.get("Return-Path", "x")).strip("<> ")  # a bounce: null sender
    )
