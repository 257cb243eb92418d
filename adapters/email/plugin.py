"""The email platform as the gateway sees it: settings, when it runs, how it is built, and
the doctor check (an IMAP login and a select of the folder)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.email.settings import EmailSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin

if TYPE_CHECKING:
    import httpx


def _build(settings: EmailSettings, ctx: AdapterContext) -> Adapter:
    from adapters.email.adapter import EmailAdapter

    return EmailAdapter(settings, ctx)


async def _check(settings: EmailSettings, http: httpx.AsyncClient) -> CheckResult:
    from adapters.email.adapter import tls_context
    from adapters.email.mailbox import Mailbox, MailboxError

    mailbox = Mailbox(settings, tls_context(settings))
    try:
        await mailbox.open()
    except MailboxError as exc:
        return CheckResult(
            "email", False, str(exc), "check email.imap_host, imap_port, username and password"
        )
    finally:
        await mailbox.close()
    return CheckResult(
        "email", True, f"IMAP login as {settings.username}, folder {settings.folder}"
    )


PLUGIN = PlatformPlugin(
    name="email",
    title="Email",
    settings=EmailSettings,
    enabled=lambda s: s.configured,
    build=_build,
    check=_check,
    requires=("aioimaplib", "aiosmtplib"),
    extra="email",
    how_to_enable=(
        "CHATGATE_EMAIL__IMAP_HOST, CHATGATE_EMAIL__SMTP_HOST, CHATGATE_EMAIL__USERNAME "
        "and CHATGATE_EMAIL__PASSWORD"
    ),
)
