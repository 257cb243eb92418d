"""Pairing (`access.unknown = "pair"`): a person not on the allow list gets a short one-time
code, the admins get a notice with Approve/Deny buttons, and an approval lets the person in.

Codes and grants are sealed in the store (gateway/approvals/seals.py), so a command that can
write the store can neither forge a grant nor approve a code; an entry that does not verify
is ignored and counted. The first decision on a code wins, on whichever replica it lands.
Admins manage pairing with `/pairing list|approve CODE|deny CODE|revoke USER` and in the
operator console.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Literal

from gateway.approvals.seals import EntrySigner
from gateway.config import AccessSettings
from gateway.intake.access import NOT_ALLOWED, AccessPolicy
from gateway.sdk.callbacks import CallbackData
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Command, CommandCall, Extensions
from gateway.sdk.messages import (
    Button,
    ButtonPress,
    ChatKind,
    ChatRef,
    Inbound,
    Outbound,
    PressReply,
    UserRef,
)
from gateway.store import keys
from gateway.store.base import Store

log = logging.getLogger(__name__)

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: read aloud and typed
CODE_LENGTH = 6
DENIED_TTL = 24 * 3600.0  # a denied person is refused, not asked about again, for a day
_CODE = "pairing code"
_GRANT = "pairing grant"
ONLY_ADMINS = "Only an admin can decide on pairing."
IN_GROUPS = (
    NOT_ALLOWED[:-1] + ", or send me a direct message to ask for access with a pairing code."
)


@dataclass(frozen=True)
class PairingChoice(CallbackData, prefix="pair"):
    """A button on the admins' notice of a pairing request."""

    code: str
    choice: Literal["approve", "deny"]


@dataclass(frozen=True)
class PairingCode:
    code: str
    user: dict[str, object]  # UserRef as JSON
    chat: dict[str, object]  # where they asked (a direct chat)
    created: float
    expires: float

    @property
    def user_ref(self) -> UserRef:
        return UserRef.model_validate(self.user)

    @property
    def chat_ref(self) -> ChatRef:
        return ChatRef.model_validate(self.chat)


@dataclass(frozen=True)
class PairingGrant:
    user: dict[str, object]
    by: str  # the admin's address
    by_label: str
    at: float
    code: str

    @property
    def user_ref(self) -> UserRef:
        return UserRef.model_validate(self.user)


class PairingBook:
    """The sealed codes and grants in the store."""

    def __init__(self, store: Store, signer: EntrySigner, code_ttl: float) -> None:
        self._store = store
        self._signer = signer
        self.code_ttl = code_ttl

    async def granted(self, user: UserRef) -> PairingGrant | None:
        raw = await self._store.hget(keys.PAIRING_GRANTS, user.address)
        grant = self._open_grant(user.address, raw)
        return grant if grant is not None and grant.user_ref.address == user.address else None

    async def grants(self) -> list[PairingGrant]:
        stored = await self._store.hgetall(keys.PAIRING_GRANTS)
        found = (self._open_grant(address, raw) for address, raw in stored.items())
        return sorted((g for g in found if g is not None), key=lambda g: g.at)

    async def issue(self, user: UserRef, chat: ChatRef) -> tuple[PairingCode, bool]:
        """The person's live code, or a new one; True when it is new (the admins are told)."""
        now = time.time()
        code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
        mine = keys.pairing_user(user.address)
        if not await self._store.set(mine, code, ttl=self.code_ttl, only_if_absent=True):
            current = await self.code(await self._store.get(mine) or "")
            if current is not None and current.user_ref.address == user.address:
                return current, False
            await self._store.set(mine, code, ttl=self.code_ttl)
        record = PairingCode(
            code,
            user.model_dump(mode="json"),
            chat.model_dump(mode="json"),
            now,
            now + self.code_ttl,
        )
        where = f"{keys.PAIRING_CODES}\0{code}"
        await self._store.hset(
            keys.PAIRING_CODES, code, self._signer.seal(_CODE, where, asdict(record))
        )
        return record, True

    async def code(self, code: str) -> PairingCode | None:
        """A live code, when its record verifies."""
        code = code.strip().upper()
        if not code or len(code) > 16:
            return None
        where = f"{keys.PAIRING_CODES}\0{code}"
        value = self._signer.open(_CODE, where, await self._store.hget(keys.PAIRING_CODES, code))
        if not isinstance(value, dict):
            return None
        try:
            record = PairingCode(**value)
        except TypeError:
            self._signer.report(_CODE, where)
            return None
        return record if record.expires > time.time() and record.code == code else None

    async def pending(self) -> list[PairingCode]:
        """Live codes, oldest first; expired ones are cleared on the way."""
        found = []
        for code in await self._store.hgetall(keys.PAIRING_CODES):
            record = await self.code(code)
            if record is None:
                await self._store.hdel(keys.PAIRING_CODES, code)
            else:
                found.append(record)
        return sorted(found, key=lambda r: r.created)

    async def claim(self, code: str) -> bool:
        """The one decision on a code: True for the first caller only."""
        return await self._store.set(
            keys.pairing_decided(code), "1", ttl=self.code_ttl, only_if_absent=True
        )

    async def close(self, record: PairingCode) -> None:
        await self._store.hdel(keys.PAIRING_CODES, record.code)
        await self._store.delete(keys.pairing_user(record.user_ref.address))

    async def grant(self, record: PairingCode, by: UserRef) -> PairingGrant:
        user = record.user_ref
        grant = PairingGrant(
            user.model_dump(mode="json"), by.address, by.label, time.time(), record.code
        )
        where = f"{keys.PAIRING_GRANTS}\0{user.address}"
        await self._store.hset(
            keys.PAIRING_GRANTS, user.address, self._signer.seal(_GRANT, where, asdict(grant))
        )
        await self._store.delete(keys.pairing_denied(user.address))
        return grant

    async def deny(self, record: PairingCode) -> None:
        await self._store.set(keys.pairing_denied(record.user_ref.address), "1", ttl=DENIED_TTL)

    async def denied(self, user: UserRef) -> bool:
        return await self._store.get(keys.pairing_denied(user.address)) is not None

    async def revoke(self, address: str) -> bool:
        return bool(await self._store.hdel(keys.PAIRING_GRANTS, address))

    def _open_grant(self, address: str, raw: str | None) -> PairingGrant | None:
        where = f"{keys.PAIRING_GRANTS}\0{address}"
        value = self._signer.open(_GRANT, where, raw)
        if not isinstance(value, dict):
            return None
        try:
            return PairingGrant(**value)
        except TypeError:
            self._signer.report(_GRANT, where)
            return None


class Pairing:
    """The flow: codes to strangers, notices and buttons to admins, the /pairing command."""

    def __init__(
        self,
        *,
        book: PairingBook,
        outbox: Outbox,
        access: AccessPolicy,
        settings: AccessSettings,
    ) -> None:
        self.book = book
        self._outbox = outbox
        self._access = access
        self._admins = list(settings.admins)

    def register(self, extensions: Extensions) -> None:
        extensions.add_buttons(PairingChoice, self._press)
        extensions.add_command(
            Command(
                "pairing",
                "admins: /pairing list | approve CODE | deny CODE | revoke USER",
                self._command,
            )
        )

    async def paired(self, user: UserRef) -> bool:
        return await self.book.granted(user) is not None

    async def ask(self, inbound: Inbound) -> str | None:
        """What to tell a person who is not on the allow list (None: nothing, they were told
        recently); gives them a code and tells the admins when the code is new."""
        user = inbound.sender
        if user.is_bot:
            return None
        if inbound.chat.kind is not ChatKind.DIRECT:
            return IN_GROUPS if await self._access.tell_refusal(inbound) else None
        if await self.book.denied(user):
            return NOT_ALLOWED if await self._access.tell_refusal(inbound) else None
        record, new = await self.book.issue(user, inbound.chat)
        minutes = max(round((record.expires - time.time()) / 60), 1)
        text = (
            f"You are not on this bot's list yet. Your pairing code is {record.code}; an admin "
            f"has been asked to let you in (the code expires in {minutes} min). Once they do, "
            "send your message again."
        )
        if new:
            await self._access.tell_refusal(inbound)  # later messages this hour: told already
            log.info("pairing requested user=%s code=%s", user.address, record.code)
            await self._notify_admins(record)
            return text
        return text if await self._access.tell_refusal(inbound) else None

    async def decide(self, code: str, approve: bool, by: UserRef) -> str:
        """Approve or deny a code as `by` (an admin, checked by the caller); the outcome."""
        record = await self.book.code(code)
        if record is None:
            return f"There is no pairing request with code {code.strip().upper()} (or it expired)."
        if not await self.book.claim(record.code):
            return f"The pairing request {record.code} was already decided."
        await self.book.close(record)
        user = record.user_ref
        if approve:
            await self.book.grant(record, by)
            told = "An admin let you in. Send your message again and I will answer."
            outcome = f"Approved: {user.label} ({user.address}) may use the bot now."
        else:
            await self.book.deny(record)
            told = NOT_ALLOWED
            outcome = f"Denied: {user.label} ({user.address}) was not let in."
        log.info(
            "pairing decided user=%s code=%s approved=%s by=%s",
            user.address,
            record.code,
            approve,
            by.address,
        )
        try:
            await self._outbox.send(Outbound(chat=record.chat_ref, text=told))
        except Exception as exc:
            log.warning("pairing outcome not delivered user=%s error=%s", user.address, exc)
        return outcome

    async def revoke(self, address: str, by: UserRef) -> str:
        address = address.strip()
        if not await self.book.revoke(address):
            return f"{address} has no pairing grant."
        log.info("pairing revoked user=%s by=%s", address, by.address)
        return f"Revoked: {address} is no longer let in by pairing."

    async def listing(self) -> str:
        lines = []
        for record in await self.book.pending():
            user = record.user_ref
            minutes = max(round((record.expires - time.time()) / 60), 1)
            lines.append(
                f"- {record.code}: {user.label} ({user.address}), expires in {minutes} min"
            )
        grants = [
            f"- {g.user_ref.label} ({g.user_ref.address}), approved by {g.by_label}"
            for g in await self.book.grants()
        ]
        waiting = "\n".join(lines) or "- none"
        paired = "\n".join(grants) or "- none"
        return f"Waiting for a decision:\n{waiting}\nLet in by pairing:\n{paired}"

    async def _command(self, call: CommandCall) -> str:
        sender = call.inbound.sender
        if not self._access.is_admin(sender):
            return "Only an admin can use /pairing."
        action, _, rest = call.args.partition(" ")
        action = action.lower()
        if action in ("", "list"):
            return await self.listing()
        if action in ("approve", "deny") and rest.strip():
            return await self.decide(rest, action == "approve", sender)
        if action == "revoke" and rest.strip():
            return await self.revoke(rest, sender)
        return "Usage: /pairing list | approve CODE | deny CODE | revoke USER (e.g. telegram:42)"

    async def _press(self, press: ButtonPress, data: PairingChoice) -> PressReply:
        if press.user.is_bot or not self._access.is_admin(press.user):
            return PressReply(toast=ONLY_ADMINS, alert=True)
        outcome = await self.decide(data.code, data.choice == "approve", press.user)
        return PressReply(toast=outcome.split(":", 1)[0] + ".", edit_text=outcome)

    async def _notify_admins(self, record: PairingCode) -> None:
        user = record.user_ref
        text = (
            f"**Pairing request** from {user.label} ({user.address}), code {record.code}.\n"
            f"Let them use the bot? Or reply `/pairing approve {record.code}` or "
            f"`/pairing deny {record.code}`."
        )
        buttons = (
            (
                Button(
                    label="Approve",
                    data=PairingChoice(record.code, "approve").pack(),
                    style="primary",
                ),
                Button(
                    label="Deny", data=PairingChoice(record.code, "deny").pack(), style="danger"
                ),
            ),
        )
        told = 0
        for address in self._admins:
            platform, _, user_id = address.partition(":")
            if not user_id or not self._outbox.has(platform):
                continue
            try:
                direct = await self._outbox.direct_chat(platform, user_id)
                await self._outbox.send(
                    Outbound(chat=direct, text=text, buttons=buttons, markdown=True)
                )
                told += 1
            except Exception as exc:
                log.warning("pairing notice not delivered admin=%s error=%s", address, exc)
        if not told:
            log.warning(
                "pairing request told to no admin code=%s (the console lists it)", record.code
            )
