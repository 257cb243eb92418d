"""Email end to end against real servers: a private Dovecot holds the bot's mailbox (mail is
delivered into it with IMAP APPEND, as the receiving server would, with its
Authentication-Results header), aiosmtpd receives what the bot sends, and the real gateway
reads with aioimaplib and sends with aiosmtplib; the scripted LLM answers."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from email.message import EmailMessage
from email.utils import make_msgid
from pathlib import Path
from typing import Any

import aioimaplib
import httpx
import pytest
from pydantic import SecretStr

from adapters.email import EmailAdapter
from adapters.email.plugin import PLUGIN as EMAIL
from gateway.app.app import App
from gateway.config import Settings
from gateway.sdk.messages import ChatRef
from tests.certs import self_signed
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fixtures_redis import RedisServer
from tests.harness import configured_gateway, eventually, gateway_settings
from tests.mail_servers import (
    PASSWORD,
    Dovecot,
    Outgoing,
    SmtpSink,
    dovecot_missing,
)
from tests.media_samples import PDF, png
from tools.files.workspaces import Workspaces

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(bool(dovecot_missing()), reason=dovecot_missing() or "-"),
]

BOT = "bot@example.com"
ALICE = "alice@example.com"
PASSED = f"example.com; spf=pass smtp.mailfrom={ALICE}; dkim=pass header.d=example.com"


@dataclass
class Mail:
    """The test's side of the mail system: deliver into the bot's folder, read what it sent."""

    dovecot: Dovecot
    smtp: SmtpSink

    async def imap(self) -> aioimaplib.IMAP4:
        client = aioimaplib.IMAP4(host="127.0.0.1", port=self.dovecot.port, timeout=10)
        await client.wait_hello_from_server()
        login = await client.login(BOT, PASSWORD)
        assert login.result == "OK", (login, self.dovecot.log())
        return client

    async def deliver(self, message: EmailMessage | bytes) -> int:
        """APPEND into INBOX (what an MTA's delivery does); returns the mail's UID."""
        raw = message if isinstance(message, bytes) else message.as_bytes()
        client = await self.imap()
        try:
            response = await client.append(raw, mailbox="INBOX")
            assert response.result == "OK", response
            found = re.search(rb"APPENDUID \d+ (\d+)", b" ".join(bytes(x) for x in response.lines))
            assert found
            return int(found.group(1))
        finally:
            await client.logout()

    async def count(self, folder: str, criteria: str = "ALL") -> int:
        client = await self.imap()
        try:
            selected = await client.select(folder)
            if selected.result != "OK":
                return 0
            response = await client.uid_search(criteria)
            return len(bytes(response.lines[0]).split())
        finally:
            await client.logout()

    async def uidvalidity(self) -> int:
        client = await self.imap()
        try:
            response = await client.select("INBOX")
            found = re.search(rb"UIDVALIDITY (\d+)", b" ".join(bytes(x) for x in response.lines))
            assert found
            return int(found.group(1))
        finally:
            await client.logout()

    async def all_seen(self, within: float = 15.0) -> None:
        deadline = asyncio.get_running_loop().time() + within
        while await self.count("INBOX", "UNSEEN"):
            assert asyncio.get_running_loop().time() < deadline, "mail left unseen"
            await asyncio.sleep(0.1)

    async def reply_to_bot(self, sent: Outgoing, text: str, **kwargs: Any) -> EmailMessage:
        """Alice answers a mail of the bot, as a mail client does (Re:, References)."""
        references = f"{sent.header('References')} {sent.header('Message-ID')}".strip()
        return mail(
            text,
            subject=f"Re: {sent.header('Subject').removeprefix('Re: ')}",
            in_reply_to=sent.header("Message-ID"),
            references=references,
            **kwargs,
        )


def mail(
    text: str,
    *,
    sender: str = f"Alice <{ALICE}>",
    subject: str = "Quarterly plan",
    in_reply_to: str = "",
    references: str = "",
    auth: str | None = PASSED,
    files: tuple[tuple[str, str, bytes], ...] = (),
    html: str = "",
) -> EmailMessage:
    message = EmailMessage()
    if auth is not None:
        message["Authentication-Results"] = auth
    message["From"] = sender
    message["To"] = BOT
    message["Subject"] = subject
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2].rstrip(">"))
    if in_reply_to:
        message["In-Reply-To"] = in_reply_to
        message["References"] = references
    message.set_content(text)
    if html:
        message.add_alternative(html, subtype="html")
    for name, mime, data in files:
        major, _, minor = mime.partition("/")
        message.add_attachment(data, maintype=major, subtype=minor, filename=name)
    return message


def email_settings(
    tmp_path: Path,
    llm: ScriptedLLM,
    dovecot: Dovecot,
    smtp: SmtpSink,
    *,
    redis_url: str = "",
    key_prefix: str = "",
    **email: Any,
) -> Settings:
    """The test gateway's settings; `email` overrides keys of the [email] section."""
    return gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        scheduler={"leader_ttl": 1.0},
        access={"admins": ["web:ops"], "rate_limit_per_minute": 0},
        email={
            "imap_host": "127.0.0.1",
            "imap_port": dovecot.port,
            "imap_tls": False,
            "smtp_host": "127.0.0.1",
            "smtp_port": smtp.port,
            "smtp_security": "none",
            "username": BOT,
            "password": PASSWORD,
            "address": BOT,
            "allowed_senders": [ALICE, "@team.example"],
            "require_authentication_results": True,
            "leader_ttl": 1.0,
            "timeout": 5.0,  # a connection the restarted server never greets fails soon
            **email,
        },
    )


@pytest.fixture
async def servers() -> AsyncIterator[Mail]:
    dovecot = await asyncio.to_thread(Dovecot, BOT)
    smtp = SmtpSink(BOT, PASSWORD)
    try:
        await asyncio.to_thread(dovecot.start)
        smtp.start()
        yield Mail(dovecot, smtp)
    finally:
        smtp.stop()
        await asyncio.to_thread(dovecot.remove)


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, servers: Mail) -> AsyncIterator[App]:
    settings = email_settings(tmp_path, llm, servers.dovecot, servers.smtp)
    async with configured_gateway(settings) as app:
        yield app


def to_alice(text: str) -> Any:
    return lambda m: m.rcpt_tos == [ALICE] and text in m.text


def chat_dir(settings: Settings) -> Path:
    chat = ChatRef(platform="email", chat_id=ALICE)
    folder = Workspaces(settings.workspace, settings.tools.workspace_scope).folder(chat)
    return settings.workspace.joinpath(*folder)


async def test_a_mail_is_answered_in_its_thread_and_a_reply_continues_the_session(
    gw: App, servers: Mail, llm: ScriptedLLM
) -> None:
    llm.push(Reply.text("Revenue is **up**."), Reply.text("The budget is 40k."))
    first = mail("How did Q3 go?\n\n-- \nAlice Example\nHead of Sales")
    await servers.deliver(first)
    answer = await servers.smtp.wait_for(to_alice("Revenue is **up**."))
    assert last_user_text(llm.requests[0]) == "Subject: Quarterly plan\n\nHow did Q3 go?"
    assert answer.header("In-Reply-To") == first["Message-ID"]
    assert answer.header("References") == first["Message-ID"]
    assert answer.header("Subject") == "Re: Quarterly plan"
    assert answer.header("From").endswith(f"<{BOT}>")
    assert answer.header("Auto-Submitted") == "auto-replied"
    assert ">" not in answer.text  # nothing quoted
    await servers.all_seen()

    quoted = (
        "And the budget?\n\nOn Mon, 3 Nov 2026 at 10:00, chatgate <bot@example.com> wrote:\n"
        "> Revenue is **up**.\n"
    )
    second = await servers.reply_to_bot(answer, quoted)
    await servers.deliver(second)
    again = await servers.smtp.wait_for(to_alice("The budget is 40k."))
    assert last_user_text(llm.requests[1]) == "And the budget?"  # no quote, no subject
    history = [m.get("content") for m in llm.requests[1]["messages"]]
    assert "Revenue is **up**." in history  # the same session
    assert again.header("In-Reply-To") == second["Message-ID"]
    assert again.header("References").split() == [
        first["Message-ID"],
        answer.header("Message-ID"),
        second["Message-ID"],
    ]


async def test_an_attachment_in_and_a_file_out(gw: App, servers: Mail, llm: ScriptedLLM) -> None:
    report = PDF + b"quarterly numbers" * 200
    file_id = f"{await servers.uidvalidity()}.1.0"  # the first mail's first attachment
    chart = png(64, 48)
    (chat_dir(gw.settings) / "out").mkdir(parents=True)
    (chat_dir(gw.settings) / "out/chart.png").write_bytes(chart)
    llm.push(
        Reply.calls(("save_attachment", {"file_id": file_id})),
        Reply.calls(("send_file", {"path": "out/chart.png", "caption": "The chart"})),
        Reply.text("Saved, and here is the chart."),
    )
    uid = await servers.deliver(
        mail(
            "<p>Keep <b>this</b> report</p>",
            html="<html><body><p>Keep <b>this</b> report</p></body></html>",
            files=(("q3.pdf", "application/pdf", report),),
        )
    )
    assert uid == 1
    await servers.smtp.wait_for(to_alice("Saved, and here is the chart."))
    seen = last_user_text(llm.requests[0])
    assert "[attachment: document q3.pdf (application/pdf" in seen and file_id in seen
    assert tool_results(llm.requests[1]) == [
        f"saved attachments/q3.pdf (application/pdf, {len(report):,} bytes)"
    ]
    assert (chat_dir(gw.settings) / "attachments/q3.pdf").read_bytes() == report
    sent = await servers.smtp.wait_for(lambda m: bool(list(m.message.iter_attachments())))
    [attached] = list(sent.message.iter_attachments())
    assert attached.get_filename() == "chart.png" and attached.get_content() == chart
    assert "The chart" in sent.text and sent.header("Subject") == "Re: Quarterly plan"


async def test_an_approval_is_decided_by_the_requesters_authenticated_reply(
    gw: App, servers: Mail, llm: ScriptedLLM
) -> None:
    (chat_dir(gw.settings) / "build").mkdir(parents=True)
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Cleaned."))
    await servers.deliver(mail("clean the build", subject="Build"))
    prompt = await servers.smtp.wait_for(to_alice("Approval needed"))
    found = re.search(r"^\s*approve (\w+)\s*$", prompt.text, re.MULTILINE)
    assert found, prompt.text
    request_id = found.group(1)
    assert f"deny {request_id}" in prompt.text and "console" in prompt.text

    # Bob (an allowed sender) answers in Alice's thread: not his request, not his chat.
    bob = await servers.reply_to_bot(
        prompt,
        f"approve {request_id}",
        sender="Bob <bob@team.example>",
        auth="example.com; dkim=pass header.d=team.example",
    )
    await servers.deliver(bob)
    # A mail that claims to be Alice's, with a verdict the sender wrote under another name.
    spoofed = await servers.reply_to_bot(
        prompt,
        f"approve {request_id}",
        auth="evil.example; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=" + ALICE,
    )
    await servers.deliver(spoofed)
    await servers.smtp.wait_for(lambda m: m.rcpt_tos == ["bob@team.example"])
    await servers.all_seen()
    assert (chat_dir(gw.settings) / "build").exists()

    decision = await servers.reply_to_bot(prompt, f"approve {request_id}\n\n> Approval needed")
    await servers.deliver(decision)
    await servers.smtp.wait_for(to_alice("Cleaned."))
    assert not (chat_dir(gw.settings) / "build").exists()
    assert "[exit code 0]" in tool_results(llm.requests[1])[0]
    assert len(llm.requests) == 2  # the decisions never reached the model


async def test_fetching_goes_on_after_the_imap_server_restarts(
    gw: App, servers: Mail, llm: ScriptedLLM
) -> None:
    adapter = gw.outbox.adapter("email")
    assert isinstance(adapter, EmailAdapter)
    await eventually(lambda: adapter.fetching, what="fetching")
    await asyncio.sleep(0.5)  # connected and waiting in IDLE
    await asyncio.to_thread(servers.dovecot.stop)
    await asyncio.to_thread(servers.dovecot.start)
    llm.push(Reply.text("Back again."))
    await servers.deliver(mail("still there?"))
    await servers.smtp.wait_for(to_alice("Back again."), within=30)


async def test_replies_go_out_over_starttls_with_the_password_only_after_it(
    tmp_path: Path, llm: ScriptedLLM, servers: Mail
) -> None:
    cert, key = await asyncio.to_thread(self_signed, tmp_path)
    smtp = SmtpSink(BOT, PASSWORD, tls=(cert, key))
    smtp.start()
    try:
        # The server's self-signed certificate is checked against tls_ca_file.
        settings = email_settings(
            tmp_path, llm, servers.dovecot, smtp, smtp_security="starttls", tls_ca_file=str(cert)
        )
        llm.push(Reply.text("Over TLS."))
        async with configured_gateway(settings):
            await servers.deliver(mail("secure?"))
            await smtp.wait_for(to_alice("Over TLS."))
    finally:
        smtp.stop()


async def test_doctor_logs_in_and_names_a_wrong_password(
    tmp_path: Path, llm: ScriptedLLM, servers: Mail
) -> None:
    settings = email_settings(tmp_path, llm, servers.dovecot, servers.smtp)
    section = EMAIL.section(settings)
    assert EMAIL.check is not None
    async with httpx.AsyncClient() as http:
        good = await EMAIL.check(section, http)
        bad = await EMAIL.check(section.model_copy(update={"password": SecretStr("no")}), http)
    assert good.ok and "bot@example.com" in good.detail
    assert not bad.ok and "refused the login" in bad.detail and "no" not in bad.detail.split()


async def test_a_sender_not_allowed_gets_nothing(gw: App, servers: Mail, llm: ScriptedLLM) -> None:
    await servers.deliver(
        mail(
            "hello?",
            sender="Mallory <mallory@elsewhere.example>",
            auth="example.com; dkim=pass header.d=elsewhere.example",
        )
    )
    await servers.all_seen()
    await asyncio.sleep(0.5)
    assert servers.smtp.received == [] and llm.requests == []


async def test_a_failed_authentication_result_is_not_trusted(
    gw: App, servers: Mail, llm: ScriptedLLM
) -> None:
    failed = f"example.com; spf=fail smtp.mailfrom={ALICE}; dkim=fail header.d=example.com"
    await servers.deliver(mail("run this for me", auth=failed))
    await servers.deliver(mail("and this", auth=None))
    await servers.all_seen()
    await asyncio.sleep(0.5)
    assert servers.smtp.received == [] and llm.requests == []


async def test_a_malformed_mail_goes_to_the_rejected_folder_and_the_next_is_answered(
    gw: App, servers: Mail, llm: ScriptedLLM
) -> None:
    llm.push(Reply.text("Still here."))
    await servers.deliver(b"this is not a mail at all\r\n\r\njust bytes\r\n")
    await servers.deliver(mail("are you there?"))
    await servers.smtp.wait_for(to_alice("Still here."))
    await eventually(lambda: True)
    assert await servers.count("chatgate-rejected") == 1
    assert await servers.count("INBOX") == 1  # the good one stays, seen
    assert len(llm.requests) == 1


async def test_a_reminder_is_delivered_by_mail_in_its_thread(
    gw: App, servers: Mail, llm: ScriptedLLM
) -> None:
    first = mail("/remind 2s stretch", subject="Reminders")
    await servers.deliver(first)
    confirmation = await servers.smtp.wait_for(to_alice("Reminder "))
    reminder = await servers.smtp.wait_for(to_alice("Reminder: stretch"), within=15)
    assert confirmation.header("In-Reply-To") == first["Message-ID"]
    assert reminder.header("Subject") == "Re: Reminders"
    assert first["Message-ID"] in reminder.header("References")
    assert llm.requests == []


@pytest.mark.redis
async def test_two_replicas_one_fetches_and_the_other_takes_over(
    tmp_path: Path, llm: ScriptedLLM, servers: Mail, redis_url: str
) -> None:
    shared = {"redis_url": redis_url, "key_prefix": f"t{uuid.uuid4().hex[:8]}"}
    replicas = [
        App(email_settings(tmp_path / name, llm, servers.dovecot, servers.smtp, **shared))
        for name in ("one", "two")
    ]
    for app in replicas:
        app.add_configured_adapters()
        await app.start()
    try:
        adapters = [app.outbox.adapter("email") for app in replicas]
        assert all(isinstance(a, EmailAdapter) for a in adapters)

        def fetching() -> list[bool]:
            return [a.fetching for a in adapters if isinstance(a, EmailAdapter)]

        await eventually(lambda: fetching().count(True) == 1, what="one replica fetching")
        llm.push(*(Reply.text(f"answer {n}") for n in range(4)))
        for n in range(3):
            await servers.deliver(mail(f"question {n}", subject=f"Q{n}"))
        for n in range(3):
            await servers.smtp.wait_for(to_alice(f"answer {n}"))
        await servers.all_seen()

        leader = fetching().index(True)
        await replicas[leader].stop()
        other = adapters[1 - leader]
        assert isinstance(other, EmailAdapter)
        await eventually(lambda: other.fetching, within=15, what="the other replica fetching")
        await servers.deliver(mail("question 3", subject="Q3"))
        await servers.smtp.wait_for(to_alice("answer 3"))
        await asyncio.sleep(0.5)
        assert len(servers.smtp.received) == 4 and len(llm.requests) == 4  # each once
    finally:
        for app in replicas:
            await app.stop()


@pytest.mark.redis
async def test_a_mail_is_marked_seen_only_once_it_is_stored(
    tmp_path: Path, llm: ScriptedLLM, servers: Mail, redis_server: RedisServer
) -> None:
    # A lease renewed every 10 s: the fetcher keeps running while the store is down.
    settings = email_settings(
        tmp_path, llm, servers.dovecot, servers.smtp, leader_ttl=30, redis_url=redis_server.url
    )
    async with configured_gateway(settings) as app:
        adapter = app.outbox.adapter("email")
        assert isinstance(adapter, EmailAdapter)
        await eventually(lambda: adapter.fetching, within=15, what="fetching")
        redis_server.stop()
        await servers.deliver(mail("while the store is down"))
        await asyncio.sleep(3)  # fetched (or not) again and again, never stored
        assert await servers.count("INBOX", "UNSEEN") == 1
        llm.push(Reply.text("Stored and answered."))
        redis_server.start()
        await servers.smtp.wait_for(to_alice("Stored and answered."), within=30)
        await servers.all_seen()
        assert len(servers.smtp.received) == 1
