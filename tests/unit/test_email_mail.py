"""Reading and writing mail for the email adapter: the person's text without quotes or
signature, HTML as text, Authentication-Results, decisions only from the person's own lines,
and a reply's thread headers and decision instructions."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from adapters.email.authresults import verdict
from adapters.email.bodytext import html_to_text, split_mail_text
from adapters.email.normalize import MalformedMail, parse_mail
from adapters.email.sending import MailSender
from adapters.email.settings import EmailSettings
from adapters.email.threads import ThreadRecord
from gateway.sdk import ApprovalChoice, Button, ChatRef, Outbound, OutboundFile
from gateway.sdk.messages import AttachmentKind


def raw_mail(body: str, **headers: str) -> bytes:
    message = EmailMessage()
    message["From"] = headers.pop("From", "Alice <alice@example.com>")
    message["To"] = "bot@example.com"
    message["Subject"] = headers.pop("Subject", "Plan")
    message["Message-ID"] = headers.pop("Message_ID", "<m1@example.com>")
    for name, value in headers.items():
        message[name.replace("_", "-")] = value
    message.set_content(body)
    return message.as_bytes()


@pytest.mark.parametrize(
    ("body", "own"),
    [
        ("Yes please.\n\nOn Tue, 4 Nov 2026, Bot <b@x> wrote:\n> old text\n", "Yes please."),
        ("Yes.\n\nOn Tue, 4 Nov 2026 at 10:00, Bot Name\n<bot@example.com> wrote:\n> x", "Yes."),
        ("Top.\n\n-----Original Message-----\nFrom: bot\nold", "Top."),
        ("Top.\n\nFrom: Bot <bot@example.com>\nSent: Tuesday\nSubject: x\nold", "Top."),
        ("> quoted line\nmy answer\n> more quote\nsecond line", "my answer\nsecond line"),
        ("Thanks\n-- \nAlice\nSales", "Thanks"),
        ("Thanks\n\nSent from my iPhone", "Thanks"),
    ],
)
def test_quotes_and_signatures_are_cut(body: str, own: str) -> None:
    assert split_mail_text(body).own == own


def test_a_forwarded_message_is_kept_apart_for_the_model() -> None:
    text = split_mail_text("fyi\n\n---------- Forwarded message ---------\nFrom: x\napprove abc1")
    assert text.own == "fyi" and text.forwarded == "From: x\napprove abc1"
    assert text.for_model() == "fyi\n\n[forwarded message]\nFrom: x\napprove abc1"


def test_html_is_read_as_text_without_quoted_blocks_or_scripts() -> None:
    html = (
        "<html><head><style>p{}</style></head><body><p>Hello <b>team</b>,</p>"
        "<ul><li>one</li><li>two</li></ul><a href='https://example.com/x'>link</a>"
        "<blockquote>old mail</blockquote><script>alert(1)</script></body></html>"
    )
    assert html_to_text(html) == "Hello team,\n\n- one\n- two\n\nlink (https://example.com/x)"


PASS = "mx.example.com; dkim=pass header.d=example.com"


@pytest.mark.parametrize(
    ("headers", "trusted"),
    [
        ([PASS], True),
        (["mx.example.com; dmarc=pass header.from=example.com"], True),
        (["mx.example.com; dkim=pass header.d=mail.example.com"], False),  # a subdomain signed
        (["mx.example.com; dkim=pass header.d=evil.example"], False),  # another domain signed
        (["mx.example.com; spf=pass smtp.mailfrom=alice@example.com"], True),
        (["mx.example.com; spf=pass smtp.mailfrom=x@evil.example"], False),
        (["mx.example.com (comment; dkim=pass); dkim=fail header.d=example.com"], False),
        (["evil.example; dkim=pass header.d=example.com"], False),  # written by the sender
        (["mx.example.com; dkim=fail header.d=example.com", PASS], False),  # topmost counts
        ([], False),
    ],
)
def test_authentication_results_from_the_trusted_server_only(
    headers: list[str], trusted: bool
) -> None:
    assert verdict(headers, "mx.example.com", "example.com").trusted is trusted


def test_a_decision_is_read_from_the_first_line_the_person_wrote() -> None:
    approve = parse_mail(raw_mail("Approve 3fa2b0c1d9\n\nOn Mon, X wrote:\n> Approval needed"))
    assert approve.text_for_model(new_thread=False) == "/approve 3fa2b0c1d9"
    deny = parse_mail(raw_mail("deny 3fa2b0c1d9 not now\nthanks"))
    assert deny.text_for_model(new_thread=False) == "/deny 3fa2b0c1d9 not now"
    quoted = parse_mail(raw_mail("ok\n\nOn Mon, X wrote:\n> approve 3fa2b0c1d9"))
    assert quoted.text_for_model(new_thread=False) == "ok"
    forwarded = parse_mail(raw_mail("see below\n-------- Forwarded message --------\napprove 3fa2"))
    assert not forwarded.text_for_model(new_thread=False).startswith("/")


def test_a_new_thread_shows_its_subject_and_attachments_are_listed() -> None:
    message = EmailMessage()
    message["From"] = "alice@example.com"
    message["Subject"] = "Numbers"
    message["Message-ID"] = "<m2@example.com>"
    message["References"] = "<root@example.com> <m1@example.com>"
    message["In-Reply-To"] = "<m1@example.com>"
    message.set_content("see the file")
    message.add_attachment(b"%PDF-1.4", maintype="application", subtype="pdf", filename="a.pdf")
    message.add_attachment(b"\x89PNG", maintype="image", subtype="png", filename="b.png")
    mail = parse_mail(message.as_bytes())
    assert mail.text_for_model(new_thread=True) == "Subject: Numbers\n\nsee the file"
    assert mail.references == ("<root@example.com>", "<m1@example.com>")
    assert [(p.index, p.name, p.kind, p.size) for p in mail.attachments] == [
        (0, "a.pdf", AttachmentKind.DOCUMENT, 8),
        (1, "b.png", AttachmentKind.IMAGE, 4),
    ]


@pytest.mark.parametrize(
    "raw",
    [
        b"not a mail\r\n\r\nbody",
        b"Subject: no sender\r\n\r\nbody",
        b"From: a@x.example, b@y.example\r\nSubject: two\r\n\r\nbody",
        b"From: nobody\r\n\r\nbody",
    ],
)
def test_mail_without_one_sender_address_is_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedMail):
        parse_mail(raw)


def test_automatic_mail_is_recognised() -> None:
    assert parse_mail(raw_mail("away", Auto_Submitted="auto-replied")).automatic
    assert parse_mail(raw_mail("bounce", Return_Path="<>")).automatic
    assert not parse_mail(raw_mail("hi", Return_Path="<alice@example.com>")).automatic


def settings() -> EmailSettings:
    return EmailSettings(
        imap_host="imap.example.com",
        smtp_host="smtp.example.com",
        username="bot@example.com",
        password="pw",
    )


def test_a_reply_keeps_the_thread_and_says_how_to_decide() -> None:
    sender = MailSender(settings(), threads=None, tls=None)  # type: ignore[arg-type]
    record = ThreadRecord(subject="Build", references=["<a@x>", "<b@x>"], last="<b@x>")
    buttons = (
        (
            Button(label="Approve once", data=ApprovalChoice("3fa2b0c1d9", "once").pack()),
            Button(label="Deny", data=ApprovalChoice("3fa2b0c1d9", "deny").pack()),
        ),
    )
    chat = ChatRef(platform="email", chat_id="alice@example.com", thread_id="t1")
    out = Outbound(
        chat=chat,
        text="**Approval needed**",
        buttons=buttons,
        attachments=(
            OutboundFile(
                kind=AttachmentKind.IMAGE, name="c.png", mime_type="image/png", data=b"png"
            ),
        ),
    )
    message = sender.compose(out, record)
    assert message["Subject"] == "Re: Build"
    assert message["In-Reply-To"] == "<b@x>" and message["References"] == "<a@x> <b@x>"
    assert message["To"] == "alice@example.com" and message["Auto-Submitted"] == "auto-replied"
    body = message.get_body(preferencelist=("plain",))
    assert body is not None
    text = body.get_content()
    assert "approve 3fa2b0c1d9" in text and "deny 3fa2b0c1d9 [reason]" in text
    [file] = list(message.iter_attachments())
    assert file.get_filename() == "c.png" and file.get_content() == b"png"


def test_a_mail_outside_a_thread_takes_its_subject_from_the_text() -> None:
    sender = MailSender(settings(), threads=None, tls=None)  # type: ignore[arg-type]
    chat = ChatRef(platform="email", chat_id="alice@example.com")
    message = sender.compose(
        Outbound(chat=chat, text="## Daily report\nAll green."), ThreadRecord()
    )
    assert message["Subject"] == "Daily report"
    assert message["In-Reply-To"] is None and message["Auto-Submitted"] == "auto-generated"


def test_an_html_only_mail_is_read_as_text() -> None:
    message = EmailMessage()
    message["From"] = "alice@example.com"
    message["Message-ID"] = "<h1@example.com>"
    message.set_content("<div>Ship <i>it</i></div><blockquote>old</blockquote>", subtype="html")
    assert parse_mail(message.as_bytes()).text.own == "Ship it"
