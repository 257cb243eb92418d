"""Mail out through SMTP (STARTTLS, implicit TLS, or plain to a relay on this machine):
a reply keeps its thread (In-Reply-To, References, "Re:" subject) and quotes nothing.

Buttons become what to reply: an approval prompt says `approve ID` / `deny ID`, other
choices are listed for the person to write back. Every mail carries Auto-Submitted, so
auto-responders do not answer it (and the intake ignores theirs).
"""

from __future__ import annotations

import logging
import ssl
from email.message import EmailMessage
from email.utils import formataddr, formatdate, make_msgid

import aiosmtplib

from adapters.email.settings import EmailSettings
from adapters.email.threads import MailThreads, ThreadRecord
from gateway.sdk import ApprovalChoice, Button, DeliveryError, Outbound, SentRef

log = logging.getLogger(__name__)

_SUBJECT_CHARS = 78
_CONSOLE_NOTE = "An admin can also decide in the chatgate console."


class MailSender:
    def __init__(self, settings: EmailSettings, threads: MailThreads, tls: ssl.SSLContext) -> None:
        self._settings = settings
        self._threads = threads
        self._tls = tls
        self._domain = settings.own_address.rpartition("@")[2] or "localhost"

    async def send(self, out: Outbound) -> SentRef:
        chat = out.chat
        record = (
            await self._threads.load(chat.chat_id, chat.thread_id)
            if chat.thread_id
            else ThreadRecord()
        )
        message = self.compose(out, record)
        message_id = str(message["Message-ID"])
        await self._deliver(message, chat.chat_id)
        if chat.thread_id:
            await self._threads.sent(chat.chat_id, chat.thread_id, record, message_id)
        log.info("mail sent to=%s thread=%s", masked(chat.chat_id), chat.thread_id or "-")
        return SentRef(chat=chat, message_id=message_id)

    def compose(self, out: Outbound, record: ThreadRecord) -> EmailMessage:
        message = EmailMessage()
        message["From"] = formataddr(("chatgate", self._settings.own_address))
        message["To"] = out.chat.chat_id
        message["Subject"] = _subject(out.text, record.subject)
        message["Date"] = formatdate(localtime=False, usegmt=True)
        message["Message-ID"] = make_msgid(domain=self._domain)
        message["Auto-Submitted"] = "auto-replied" if record.last else "auto-generated"
        answered = out.reply_to if out.reply_to and out.reply_to.startswith("<") else record.last
        if answered:
            message["In-Reply-To"] = answered
            message["References"] = " ".join(record.references or [answered])
        message.set_content(_body(out), cte="quoted-printable")
        for file in out.attachments:
            major, _, minor = file.mime_type.partition("/")
            message.add_attachment(
                file.data, maintype=major, subtype=minor or "octet-stream", filename=file.name
            )
        return message

    async def _deliver(self, message: EmailMessage, to: str) -> None:
        settings = self._settings
        assert settings.password is not None
        try:
            await aiosmtplib.send(
                message,
                hostname=settings.smtp_host,
                port=settings.smtp_port,
                username=settings.username,
                password=settings.password.get_secret_value(),
                use_tls=settings.smtp_security == "tls",
                start_tls=settings.smtp_security == "starttls",
                tls_context=self._tls if settings.smtp_security != "none" else None,
                timeout=settings.timeout,
            )
        except aiosmtplib.SMTPRecipientsRefused as exc:
            raise DeliveryError(f"the mail server refused {to}: {exc}", permanent=True) from None
        except aiosmtplib.SMTPAuthenticationError:
            raise DeliveryError(
                "the mail server refused the login: check email.username and email.password"
            ) from None
        except aiosmtplib.SMTPResponseException as exc:
            permanent = 500 <= exc.code < 600
            raise DeliveryError(
                f"the mail server answered {exc.code}", permanent=permanent
            ) from None
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise DeliveryError(f"mail not sent ({type(exc).__name__})") from None


def _subject(text: str, thread_subject: str) -> str:
    if thread_subject:
        return (
            thread_subject if thread_subject.lower().startswith("re:") else f"Re: {thread_subject}"
        )
    first = next((line.strip(" #*_`>") for line in text.splitlines() if line.strip()), "")
    if len(first) > _SUBJECT_CHARS:
        first = first[: _SUBJECT_CHARS - 1].rstrip() + "…"
    return first or "Message from chatgate"


def _body(out: Outbound) -> str:
    text = out.text.strip()
    choices = _choices(out.buttons)
    return f"{text}\n\n{choices}".strip() + "\n" if choices else (text + "\n" if text else "\n")


def _choices(rows: tuple[tuple[Button, ...], ...]) -> str:
    buttons = [button for row in rows for button in row]
    if not buttons:
        return ""
    approvals = [_approval(button) for button in buttons]
    if all(approvals):
        request_id = next(a for a in approvals if a)[0]
        return (
            "To decide, reply to this mail from your address with one line:\n"
            f"    approve {request_id}\n"
            f"or\n    deny {request_id} [reason]\n"
            f"{_CONSOLE_NOTE}"
        )
    labels = "\n".join(f"- {button.label}" for button in buttons)
    return f"Reply with one of:\n{labels}"


def _approval(button: Button) -> tuple[str, str] | None:
    try:
        choice = ApprovalChoice.unpack(button.data)
    except ValueError:
        return None
    return choice.request_id, str(choice.choice)


def masked(address: str) -> str:
    """An address in a log line: enough to tell senders apart, not a mailing list."""
    local, _, domain = address.partition("@")
    return f"{local[:2]}…@{domain}"
