"""Email settings: the `[email]` section of chatgate.toml and `CHATGATE_EMAIL__*` env."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator

from gateway.sdk import DAY, GB, MINUTE, Section


class EmailSettings(Section):
    imap_host: str = ""  # set (with username and password): the email adapter runs
    imap_port: int = Field(default=993, ge=1, le=65535)
    # true: IMAP over TLS (port 993); false: plain IMAP, for a server on this machine only.
    imap_tls: bool = True
    smtp_host: str = ""
    smtp_port: int = Field(default=587, ge=1, le=65535)
    # starttls (port 587), tls (implicit TLS, port 465), or none (a relay on this machine).
    smtp_security: Literal["starttls", "tls", "none"] = "starttls"
    # A CA bundle (PEM) to trust for the IMAP and SMTP servers' certificates besides the
    # system's, for a server with a private CA; empty: the system's only.
    tls_ca_file: str = ""
    username: str = ""
    password: SecretStr | None = None
    address: str = ""  # the bot's own address (From:); empty: the username
    folder: str = "INBOX"  # where incoming mail is read
    rejected_folder: str = "chatgate-rejected"  # where mail that cannot be read is moved
    # Who may write to the bot: addresses (alice@example.com) or domains (@example.com);
    # empty: everyone whose mail arrives.
    allowed_senders: list[str] = []
    # Trust a sender only when the receiving server's Authentication-Results header (the one
    # it added, named by authserv_id) says DKIM or SPF passed for the From: domain.
    require_authentication_results: bool = False
    # The authserv-id of the receiving server's Authentication-Results header; empty: the
    # domain of `address`. Headers with any other id are ignored (a sender can write them).
    authserv_id: str = ""
    idle: bool = True  # wait with IMAP IDLE where the server offers it; else poll
    poll_interval: float = Field(default=60.0, ge=1, le=60 * MINUTE)  # seconds between polls
    # Re-enter IDLE this often (servers end an IDLE after 30 minutes; a connection that died
    # without a word is noticed by then).
    idle_timeout: float = Field(default=5 * MINUTE, gt=0, le=29 * MINUTE)
    # The fetching lease; another replica takes over within about 1.4 times this.
    leader_ttl: float = Field(default=10.0, ge=1, le=5 * MINUTE)
    # Larger mail is not read: it is moved to the rejected folder.
    max_mail_bytes: int = Field(default=25_000_000, ge=1, le=GB)
    # How long a thread's headers are kept for replies in it.
    thread_ttl: float = Field(default=90 * DAY, gt=0, le=3 * 365 * DAY)
    timeout: float = Field(default=30.0, gt=0, le=10 * MINUTE)  # one IMAP or SMTP step

    @field_validator("allowed_senders")
    @classmethod
    def _lower(cls, value: list[str]) -> list[str]:
        return [entry.strip().lower() for entry in value if entry.strip()]

    @property
    def configured(self) -> bool:
        return bool(self.imap_host and self.smtp_host and self.username and self.password)

    @property
    def own_address(self) -> str:
        return (self.address or self.username).strip().lower()

    @property
    def trusted_authserv_id(self) -> str:
        return (self.authserv_id or self.own_address.rpartition("@")[2]).strip().lower()
