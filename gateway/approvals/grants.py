"""Standing approvals: a person's "for this session" and "always in this chat" grants.

A grant covers one person's calls of one tool with one exact shape (for the shell: the
program, subcommand, every flag and the resolved targets; tools/shellsafety), never a family
of calls, and never someone else's: in a group, what an admin approved for themselves still
asks when another member's turn wants it. Grants are sealed (gateway/approvals/seals.py), so one
written into the store by anything but the gateway is ignored. `/permissions` lists them
with who granted them and when; the person they cover, the one who granted them and admins
may revoke them.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal

from gateway.approvals.seals import EntrySigner
from gateway.intake.access import AccessPolicy
from gateway.sdk.extensions import Command, CommandCall
from gateway.store import keys
from gateway.store.base import Store

Scope = Literal["session", "chat"]
KIND = "grant"
SESSION_TTL = 7 * 24 * 3600.0  # a session grant older than this is void, even if still stored


@dataclass(frozen=True)
class Grant:
    id: str
    scope: Scope
    place: str  # the session key ("session"), or the chat as `platform:chat_id` ("chat")
    owner: str  # address of the person whose calls it covers
    owner_label: str
    tool: str
    shape: str
    command: str  # the call as the approver saw it
    by: str  # address of who granted it
    by_label: str
    at: float
    until: float = 0.0  # an "always" grant ends then (0: until revoked)

    @property
    def scope_text(self) -> str:
        if self.scope == "session":
            return "for this session"
        if self.until:
            return f"always in this chat until {_when(self.until)}"
        return "always in this chat"

    def covers(self, owner: str, tool: str, shape: str) -> bool:
        return (self.owner, self.tool, self.shape) == (owner, tool, shape)


def grant_field(owner: str, tool: str, shape: str) -> str:
    """The hash field a grant for this person, tool and shape is stored under."""
    return hashlib.sha256(f"{owner}\0{tool}\0{shape}".encode()).hexdigest()[:40]


def _places(session: str, chat_scope: str) -> tuple[tuple[Scope, str], ...]:
    return (("session", session), ("chat", chat_scope))


def location(scope: Scope, place: str) -> str:
    return keys.approved_shapes(place) if scope == "session" else keys.standing_grants(place)


class GrantBook:
    """Reads and writes sealed grants in the store."""

    def __init__(self, store: Store, signer: EntrySigner) -> None:
        self._store = store
        self._signer = signer

    async def find(
        self, session: str, chat_scope: str, owner: str, tool: str, shape: str
    ) -> Grant | None:
        """The grant covering this call, if any: the session's first, then the chat's."""
        field = grant_field(owner, tool, shape)
        for scope, place in _places(session, chat_scope):
            name = location(scope, place)
            grant = self._open(name, field, await self._store.hget(name, field))
            if grant is not None and grant.place == place and grant.covers(owner, tool, shape):
                return grant
        return None

    async def add(
        self,
        scope: Scope,
        place: str,
        *,
        owner: str,
        owner_label: str,
        tool: str,
        shape: str,
        command: str,
        by: str,
        by_label: str,
        until: float = 0.0,
    ) -> Grant:
        grant = Grant(
            id=secrets.token_hex(4),
            scope=scope,
            place=place,
            owner=owner,
            owner_label=owner_label,
            tool=tool,
            shape=shape,
            command=command[:500],
            by=by,
            by_label=by_label,
            at=time.time(),
            until=until,
        )
        name = location(scope, place)
        field = grant_field(owner, tool, shape)
        await self._store.hset(
            name, field, self._signer.seal(KIND, f"{name}\0{field}", asdict(grant))
        )
        if scope == "session":
            await self._store.expire(name, SESSION_TTL)
        return grant

    async def listing(self, session: str, chat_scope: str) -> list[Grant]:
        """The valid grants of the session and of its chat, oldest first."""
        found: list[Grant] = []
        for scope, place in _places(session, chat_scope):
            name = location(scope, place)
            for field, raw in (await self._store.hgetall(name)).items():
                grant = self._open(name, field, raw)
                if grant is not None and grant.place == place:
                    found.append(grant)
        return sorted(found, key=lambda g: g.at)

    async def revoke(self, grant: Grant) -> bool:
        name = location(grant.scope, grant.place)
        return bool(await self._store.hdel(name, grant_field(grant.owner, grant.tool, grant.shape)))

    def _open(self, name: str, field: str, raw: str | None) -> Grant | None:
        value = self._signer.open(KIND, f"{name}\0{field}", raw)
        if not isinstance(value, dict):
            return None
        try:
            grant = Grant(**value)
        except TypeError:
            self._signer.report(KIND, f"{name}\0{field}")
            return None
        if grant.scope == "session" and time.time() - grant.at > SESSION_TTL:
            return None  # replayed after its time: void
        if grant.until and time.time() > grant.until:
            return None  # an "always" grant past its expiry
        return grant


class PermissionsCommand:
    """`/permissions` lists this chat's standing grants; `/permissions revoke ID` removes one."""

    def __init__(self, book: GrantBook, access: AccessPolicy) -> None:
        self._book = book
        self._access = access

    def command(self) -> Command:
        return Command(
            "permissions",
            "standing approvals here: /permissions, /permissions revoke ID",
            self.handle,
        )

    async def handle(self, call: CommandCall) -> str:
        verb, _, rest = call.args.strip().partition(" ")
        grants = await self._book.listing(str(call.session), call.session.chat_scope)
        if verb in ("", "list"):
            return _listing(grants)
        if verb != "revoke" or not rest.strip():
            return "Usage: /permissions, or /permissions revoke ID"
        wanted = rest.strip().split()[0]
        grant = next((g for g in grants if g.id == wanted), None)
        if grant is None:
            return f"There is no standing approval {wanted} here; /permissions lists them."
        user = call.inbound.sender
        if user.address not in (grant.owner, grant.by) and not self._access.is_admin(user):
            return (
                f"Only {grant.owner_label}, {grant.by_label} (who granted it) or an admin can "
                "revoke this."
            )
        await self._book.revoke(grant)
        return f"Revoked {grant.id}: {grant.tool} `{grant.command}` now asks again."


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _listing(grants: list[Grant]) -> str:
    if not grants:
        return "No standing approvals here: everything that needs approval asks each time."
    lines = ["Standing approvals here (revoke one with /permissions revoke ID):"]
    for g in grants:
        when = _when(g.at)
        exactly = f" (exactly: `{g.shape}`)" if g.shape != g.command else ""
        lines.append(
            f"• {g.id}: {g.tool} `{g.command}`{exactly} for {g.owner_label}, {g.scope_text}; "
            f"granted by {g.by_label} on {when}"
        )
    return "\n".join(lines)
