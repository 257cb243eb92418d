"""Where jobs and `send_message` deliver besides the chat they were made in: a named home
channel (`/sethome NAME` in that chat) or another chat the gateway knows, on any platform.

Each target is checked when it is named and again when a job delivers to it: the platform
must be running here, the person must not be blocked and must pass the platform's rules for
that chat, only admins may name chats other than home channels and their own, and the
chat's and the person's budgets must not be used up.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from gateway.budgets.limits import BudgetGate, Who
from gateway.intake.access import AccessPolicy
from gateway.scheduling.jobs import JobSpec
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Command, CommandCall, Extensions
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, UserRef
from gateway.store import keys
from gateway.store.base import Store

log = logging.getLogger(__name__)

# The budget check of a person and a chat: None, or why new work there is refused.
BudgetCheck = Callable[[UserRef, ChatRef], Awaitable[str | None]]
_NAME_MAX = 40
ADMINS = "admins"  # the target naming every admin's direct chat


class TargetError(Exception):
    """A target that cannot be used; the message says why and what to do."""


class DeliveryTargets:
    def __init__(
        self,
        store: Store,
        access: AccessPolicy,
        outbox: Outbox,
        *,
        admins: list[str],
        budget: BudgetCheck | None = None,
    ) -> None:
        self._store = store
        self._access = access
        self._outbox = outbox
        self._admins = admins
        self._budget = budget

    def register(self, extensions: Extensions) -> None:
        extensions.add_command(
            Command(
                "sethome",
                "admins: name this chat as a home channel for deliveries: /sethome NAME",
                self._sethome,
            )
        )

    # -- home channels ---------------------------------------------------------------------

    async def homes(self) -> dict[str, ChatRef]:
        found = {}
        for name, raw in (await self._store.hgetall(keys.HOME_CHANNELS)).items():
            try:
                found[name] = ChatRef.model_validate(json.loads(raw))
            except ValueError:
                log.warning("unreadable home channel skipped name=%s", name)
        return found

    async def set_home(self, name: str, chat: ChatRef) -> str:
        name = _home_name(name)
        await self._store.hset(keys.HOME_CHANNELS, name, chat.model_dump_json())
        log.info("home channel set name=%s chat=%s", name, chat.address)
        return name

    # -- resolving and checking ------------------------------------------------------------

    async def resolve(self, target: str, *, user: UserRef, here: ChatRef) -> list[ChatRef]:
        """The chats `target` names for `user` (who talks in `here`), checked; raises
        TargetError. Empty target or "admins": every admin's direct chat."""
        target = target.strip()
        if not target or target.lower() == ADMINS:
            chats = await self._admin_chats()
            if not chats:
                raise TargetError("no admin can be reached here (access.admins names none)")
            return chats
        homes = await self.homes()
        name = target.removeprefix("home:").lower()
        if name in homes:
            chat = homes[name]
            await self.check(chat, user=user, here=here)
            return [chat]
        chat = await self._known_chat(target)
        await self.check(chat, user=user, here=here)
        return [chat]

    async def check(self, chat: ChatRef, *, user: UserRef, here: ChatRef) -> None:
        """Raises TargetError when `user` (talking in `here`) may not deliver to `chat` now."""
        if not self._outbox.has(chat.platform):
            raise TargetError(f"{chat.platform} is not running in this gateway")
        same = chat.platform == here.platform and chat.chat_id == here.chat_id
        home = any(h.address == chat.address for h in (await self.homes()).values())
        if not (home or same or self._access.is_admin(user)):
            raise TargetError(
                f"only admins can deliver to {chat.address}; name a home channel instead "
                "(an admin sets one with /sethome NAME in that chat)"
            )
        # The person passed the allow list when they asked; here: blocked, and the platform's
        # rules for the target chat.
        probe = Inbound(event_id="target-check", chat=chat, sender=user, text="")
        refusal = self._access.refusal(probe, paired=True)
        if refusal is not None:
            raise TargetError(f"{chat.address} does not accept messages from {user.address}")
        if self._budget is not None:
            over = await self._budget(user, chat)
            if over is not None:
                raise TargetError(f"{chat.address}: {over}")

    async def job_refusal(self, spec: JobSpec) -> str | None:
        """At a run: why the job may not deliver to its target now (None: it may)."""
        if spec.deliver_to is None:
            return None
        try:
            await self.check(spec.deliver_to, user=spec.creator, here=spec.target)
        except TargetError as exc:
            return f"{spec.deliver_to.address} refused: {exc}"
        return None

    async def _known_chat(self, target: str) -> ChatRef:
        address, _, thread = target.partition("/")
        platform, sep, chat_id = address.partition(":")
        if not sep or not chat_id:
            homes = ", ".join(sorted(await self.homes())) or "none yet"
            raise TargetError(
                f"{target!r} is neither a home channel (known: {homes}) nor a chat address "
                "like slack:C0123 or telegram:-100123"
            )
        known = await self._store.hget(keys.CHATS, f"{platform}:{chat_id}")
        if known is None:
            raise TargetError(
                f"the gateway does not know the chat {platform}:{chat_id} (it delivers only to "
                "chats it has talked in, and to home channels)"
            )
        # The kind is not kept for known chats; a group's only effect on sending is that a
        # reply may quote, and a delivery quotes nothing.
        return ChatRef(
            platform=platform, chat_id=chat_id, thread_id=thread or None, kind=ChatKind.GROUP
        )

    async def _admin_chats(self) -> list[ChatRef]:
        chats = []
        for address in self._admins:
            platform, _, user_id = address.partition(":")
            if not user_id or not self._outbox.has(platform):
                continue
            try:
                chats.append(await self._outbox.direct_chat(platform, user_id))
            except Exception as exc:
                log.warning("no direct chat with admin=%s error=%s", address, exc)
        return chats

    async def _sethome(self, call: CommandCall) -> str:
        if not self._access.is_admin(call.inbound.sender):
            return "Only an admin can set a home channel."
        try:
            name = await self.set_home(call.args or "home", call.inbound.chat)
        except TargetError as exc:
            return f"{str(exc)[:1].upper()}{str(exc)[1:]}."
        return (
            f"This chat is the home channel {name!r}: scheduled jobs and send_message can "
            f"deliver here (deliver_to={name!r})."
        )


def budget_check(gate: BudgetGate) -> BudgetCheck:
    """The budgets' verdict on new work by `user` in `chat`, as DeliveryTargets asks it."""

    async def check(user: UserRef, chat: ChatRef) -> str | None:
        refusal = await gate.check(Who(user=user, chat=chat))
        return None if refusal is None else refusal.message

    return check


def _home_name(name: str) -> str:
    name = name.strip().lower().removeprefix("#").removeprefix("home:")
    if not name or len(name) > _NAME_MAX or not all(c.isalnum() or c in "-_." for c in name):
        raise TargetError(
            f"a home channel's name is one word of letters, digits, '-', '_' or '.', at most "
            f"{_NAME_MAX} characters: /sethome team"
        )
    return name
