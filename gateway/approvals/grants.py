"""Standing approvals: a person's "for this session" and "always in this chat" grants.

A grant covers one person's calls of one tool with one exact shape (for the shell: the
program, subcommand, every flag and the resolved targets; tools/shellsafety), never a family
of calls, and never someone else's: in a group, what an admin approved for themselves still
asks when another member's turn wants it. Grants are sealed (gateway/approvals/seals.py), so one
written into the store by anything but the gateway is ignored. `/permissions` lists them
with who granted them and when; the person they cover, the one who granted them and admins
may revoke them.

A seal says where a grant belongs, not whether it still stands, so each place (a session, a
chat) also has a sealed epoch, and a grant counts only under the epoch it was made in.
Ending grants (/new, /forget, `/permissions revoke`) moves the epoch on, so a grant copied
out of the store earlier and written back later counts for nothing; without a valid epoch
record no grant counts. Each process also remembers the newest epoch it saw of a place, so
putting back an earlier epoch record is noticed while it runs.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Literal

from gateway.approvals.seals import EntrySigner
from gateway.intake.access import AccessPolicy
from gateway.sdk.extensions import Command, CommandCall
from gateway.store import keys
from gateway.store.base import Store

Scope = Literal["session", "chat"]
KIND = "grant"
EPOCH_KIND = "grant epoch"
SESSION_TTL = 7 * 24 * 3600.0  # a session grant older than this is void, even if still stored
_REMEMBERED = 50_000  # places whose newest epoch this process remembers


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
    # The place's epoch when granted; 0: made before places had epochs (no longer counts).
    epoch: int = 0

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
    """Reads and writes sealed grants and their places' epochs in the store."""

    def __init__(self, store: Store, signer: EntrySigner) -> None:
        self._store = store
        self._signer = signer
        self._newest: OrderedDict[str, int] = OrderedDict()  # place's hash -> newest epoch seen

    async def find(
        self, session: str, chat_scope: str, owner: str, tool: str, shape: str
    ) -> Grant | None:
        """The grant covering this call, if any: the session's first, then the chat's."""
        field = grant_field(owner, tool, shape)
        for scope, place in _places(session, chat_scope):
            name = location(scope, place)
            grant = self._open(name, field, await self._store.hget(name, field))
            if (
                grant is not None
                and grant.place == place
                and grant.covers(owner, tool, shape)
                and grant.epoch == await self._epoch(name)
            ):
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
        name = location(scope, place)
        epoch = await self._epoch(name) or await self._advance(name)
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
            epoch=epoch,
        )
        await self._write(grant)
        return grant

    async def _write(self, grant: Grant) -> None:
        name = location(grant.scope, grant.place)
        field = grant_field(grant.owner, grant.tool, grant.shape)
        await self._store.hset(
            name, field, self._signer.seal(KIND, f"{name}\0{field}", asdict(grant))
        )
        if grant.scope == "session":
            await self._store.expire(name, SESSION_TTL)
            await self._store.expire(keys.grant_epoch(name), SESSION_TTL)

    async def listing(self, session: str, chat_scope: str) -> list[Grant]:
        """The valid grants of the session and of its chat, oldest first."""
        found: list[Grant] = []
        for scope, place in _places(session, chat_scope):
            found += await self._valid(scope, place)
        return sorted(found, key=lambda g: g.at)

    async def _valid(self, scope: Scope, place: str) -> list[Grant]:
        name = location(scope, place)
        stored = await self._store.hgetall(name)
        epoch = await self._epoch(name) if stored else None
        grants = (self._open(name, field, raw) for field, raw in stored.items())
        return [g for g in grants if g is not None and g.place == place and g.epoch == epoch]

    async def revoke(self, grant: Grant) -> bool:
        """End one grant: the place's epoch moves on and its other grants are sealed again
        under the new one."""
        name = location(grant.scope, grant.place)
        others = [g for g in await self._valid(grant.scope, grant.place) if g.id != grant.id]
        epoch = await self._advance(name)
        removed = await self._store.hdel(name, grant_field(grant.owner, grant.tool, grant.shape))
        for other in others:
            await self._write(replace(other, epoch=epoch))
        return bool(removed)

    async def end(self, scope: Scope, place: str) -> None:
        """End every grant of a place (/new ends a session's)."""
        name = location(scope, place)
        # Without a valid epoch no grant there counts already: nothing to move on (most
        # sessions never had a grant, and retention ends many).
        if await self._epoch(name) is not None:
            await self._advance(name)
        await self._store.delete(name)

    async def end_session(self, session: str) -> None:
        await self.end("session", session)

    # -- epochs ------------------------------------------------------------------------------

    async def _epoch(self, name: str) -> int | None:
        """The place's epoch, or None when it has no valid one (then no grant there counts)."""
        where = keys.grant_epoch(name)
        raw = await self._store.get(where)
        value = self._signer.open(EPOCH_KIND, where, raw)
        if raw is not None and value is not None and not _is_epoch(value):
            self._signer.report(EPOCH_KIND, where)
        stored = value if _is_epoch(value) else None
        newest = self._newest.get(name)
        if newest is not None and (stored is None or stored < newest):
            # An earlier record put back (or this one removed, or timed out) since this process
            # saw the newer one: the newer one stands, and goes back into the store.
            if stored is not None:
                self._signer.report(EPOCH_KIND, where)
            await self._save_epoch(name, newest)
            return newest
        if stored is not None:
            self._remember(name, stored)
        return stored

    async def _advance(self, name: str) -> int:
        """Move the place to a new epoch, later than any it had (milliseconds of the clock, so
        a record lost or damaged is never followed by an epoch used before)."""
        current = max(await self._epoch(name) or 0, self._newest.get(name, 0))
        epoch = max(current + 1, int(time.time() * 1000))
        await self._save_epoch(name, epoch)
        self._remember(name, epoch)
        return epoch

    async def _save_epoch(self, name: str, epoch: int) -> None:
        where = keys.grant_epoch(name)
        # A session's grants last no longer than SESSION_TTL, so neither need its epoch; its
        # time is renewed with each grant, so it outlives every grant made under it.
        session = name.startswith(keys.approved_shapes(""))
        sealed = self._signer.seal(EPOCH_KIND, where, epoch)
        await self._store.set(where, sealed, ttl=SESSION_TTL if session else None)

    def _remember(self, name: str, epoch: int) -> None:
        if self._newest.get(name, 0) < epoch:
            self._newest[name] = epoch
        self._newest.move_to_end(name)
        while len(self._newest) > _REMEMBERED:
            self._newest.popitem(last=False)

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


def _is_epoch(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


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
