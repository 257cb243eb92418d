"""Mail threads as sessions: which thread a mail belongs to, and the headers a reply needs.

A thread is named by a digest of its first Message-ID (the first of References, else
In-Reply-To, else the mail's own id), or by the thread of a mail the bot sent when a client
only sets In-Reply-To. The record of a thread (subject, the ids to put in References, the
last mail to reply to) lives in the store, so a reply from any replica keeps the thread.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from adapters.email.normalize import PLATFORM, ParsedMail
from gateway.sdk import Store, keys

_KEPT_REFERENCES = 20  # References beyond this keep the first id and the latest ones


@dataclass
class ThreadRecord:
    subject: str = ""
    references: list[str] = field(default_factory=list)  # oldest first
    last: str = ""  # the latest mail of the thread, which a reply answers

    def add(self, message_id: str) -> None:
        if not message_id:
            return
        if message_id not in self.references:
            self.references.append(message_id)
        if len(self.references) > _KEPT_REFERENCES:
            self.references = [self.references[0], *self.references[-(_KEPT_REFERENCES - 1) :]]
        self.last = message_id


def digest(message_id: str) -> str:
    return hashlib.sha256(message_id.encode()).hexdigest()[:24]


class MailThreads:
    def __init__(self, store: Store, ttl: float) -> None:
        self._store = store
        self._ttl = ttl

    async def thread_of(self, mail: ParsedMail) -> tuple[str, bool]:
        """(thread id, whether the mail starts a new thread)."""
        if mail.in_reply_to:
            known = await self._store.get(_sent_key(mail.in_reply_to))
            if known:
                return known, False
        root = next(iter(mail.references), "") or mail.in_reply_to
        if root:
            return digest(root), False
        return digest(mail.message_id or mail.sender + mail.subject), True

    async def received(self, address: str, thread_id: str, mail: ParsedMail) -> None:
        """Remember the thread's headers as of this mail (before its turn can answer it)."""
        record = await self.load(address, thread_id)
        if not record.references:
            for message_id in mail.references or ((mail.in_reply_to,) if mail.in_reply_to else ()):
                record.add(message_id)
        if not record.subject:
            record.subject = mail.subject
        record.add(mail.message_id)
        await self._save(address, thread_id, record)

    async def sent(
        self, address: str, thread_id: str, record: ThreadRecord, message_id: str
    ) -> None:
        record.add(message_id)
        await self._save(address, thread_id, record)
        await self._store.set(_sent_key(message_id), thread_id, ttl=self._ttl)

    async def load(self, address: str, thread_id: str) -> ThreadRecord:
        data = await self._store.get_json(keys.platform_thread(PLATFORM, address, thread_id))
        if not isinstance(data, dict):
            return ThreadRecord()
        return ThreadRecord(
            subject=str(data.get("subject", "")),
            references=[str(r) for r in data.get("references", [])],
            last=str(data.get("last", "")),
        )

    async def _save(self, address: str, thread_id: str, record: ThreadRecord) -> None:
        value = {"subject": record.subject, "references": record.references, "last": record.last}
        await self._store.set_json(
            keys.platform_thread(PLATFORM, address, thread_id), value, ttl=self._ttl
        )


def _sent_key(message_id: str) -> str:
    # A mail the bot sent, by the digest of its Message-ID: its thread.
    return keys.platform_thread(PLATFORM, "sent", digest(message_id))
