"""Human approval of tool calls: durable requests, chat buttons, first answer wins, timeout = deny.

A turn that wants to run something destructive stores an `ApprovalRequest`,
shows it in the chat with buttons (and a `/approve ID` text fallback), and waits.
The decision is written once through a `Rendezvous`, atomic in the store, so it
reaches the waiting turn even when the press lands on another replica, and a
second press can never change it. Only the requester or an admin may decide
(configurable), never the model: decisions come only from button presses and
commands typed by a person. Requests left pending by a process that died are
expired with a notice, so their command never runs.

Requests and decisions are sealed (gateway/approvals/seals.py): an entry that a command wrote
into the store itself does not verify and is ignored. "Approve for session" and "Always
allow in this chat" become grants for the requester's exact call shape (approvals/grants.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

from gateway.approvals.grants import Grant, GrantBook, PermissionsCommand, Scope
from gateway.approvals.records import (
    UNATTENDED,
    ApprovalChoice,
    ApprovalRequest,
    Choice,
    Decision,
    decided_text,
    outcome_text,
    prompt_text,
)
from gateway.approvals.rendezvous import Rendezvous
from gateway.approvals.seals import EntrySigner
from gateway.config import ApprovalSettings
from gateway.intake.access import AccessPolicy
from gateway.runtime.metrics import Metrics
from gateway.runtime.tasks import stop_tasks
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Command, CommandCall, Extensions
from gateway.sdk.messages import Button, ButtonPress, ChatRef, Outbound, PressReply, UserRef
from gateway.sdk.tooling import ApprovalNeed, ApprovalOutcome, ToolContext
from gateway.sessions.key import SessionKey
from gateway.store import keys
from gateway.store.base import Batch, Store, StoreUnavailable

log = logging.getLogger(__name__)

PENDING = keys.APPROVALS_PENDING
AUDIT = keys.APPROVALS_AUDIT
_REQUEST = "approval request"
_HEARTBEAT_TTL = 15.0
UNATTENDED_REFUSAL = (
    "A request made through the API is approved by an operator (the console at /admin, or "
    "the prompt sent to the admins), not from the API; /deny still withdraws it."
)


class ApprovalService:
    """Implements the agent's ApprovalGate and handles the presses and commands that decide."""

    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        access: AccessPolicy,
        settings: ApprovalSettings,
        instance_id: str,
        signer: EntrySigner,
        metrics: Metrics | None = None,
        grants: GrantBook | None = None,
    ) -> None:
        self._store = store
        self._metrics = metrics or Metrics()
        self._waiting = 0  # requests turns in this process are waiting on
        self._outbox = outbox
        self._access = access
        self._settings = settings
        self._instance = instance_id
        self._signer = signer
        self._answers = Rendezvous(store, "approvals", signer)
        # Shared with what ends sessions (/new), so this process remembers the epochs it moved.
        self._grants = grants or GrantBook(store, signer)
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def asks_after_untrusted(self) -> bool:
        return self._settings.after_untrusted == "ask"

    def register(self, extensions: Extensions) -> None:
        extensions.add_buttons(ApprovalChoice, self.handle_press)
        for name, text in (
            ("approve", "approve a pending action: /approve ID"),
            ("deny", "deny a pending action: /deny ID [reason]"),
        ):
            extensions.add_command(Command(name, text, self._cmd))
        extensions.add_command(PermissionsCommand(self._grants, self._access).command())

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._heartbeat(), name="approvals heartbeat"),
            asyncio.create_task(self._sweep_orphans(), name="approvals sweeper"),
        ]

    async def stop(self) -> None:
        await stop_tasks(self._tasks)
        await self._answers.close()

    # -- the gate the agent calls ----------------------------------------------------------

    async def decide(self, need: ApprovalNeed, tool: str, ctx: ToolContext) -> ApprovalOutcome:
        shape = need.shape or need.summary
        session = ctx.session
        grant = (
            await self._grants.find(str(session), session.chat_scope, ctx.user.address, tool, shape)
            if need.standing
            else None  # what it touches is only known when it runs: no grant covers it
        )
        if grant is not None:
            log.info("approval covered session=%s tool=%s grant=%s", session, tool, grant.id)
            return ApprovalOutcome(True, f"approved earlier by {grant.by_label} {grant.scope_text}")
        now = time.time()
        request = ApprovalRequest(
            id=secrets.token_hex(5),
            tool=tool,
            command=need.summary,
            reason=need.reason,
            cwd=need.cwd,
            shape=shape,
            session=str(ctx.session),
            chat=ctx.chat.model_dump(mode="json"),
            requester=ctx.user.model_dump(mode="json"),
            created=now,
            expires=now + self._settings.timeout_seconds,
            owner=self._instance,
            where=need.where,
            untrusted=need.untrusted,
            admins_only=need.admins_only,
            standing=need.standing,
        )
        await self._open(request, ctx)
        # The reply being streamed is finished first, so the prompt comes below it and the
        # reply goes on below the prompt once a decision is in.
        async with ctx.stream.paused():
            request.message = await self._show(request)
            await self._save(request)
            log.info("approval requested id=%s session=%s tool=%s", request.id, ctx.session, tool)
            self._pending(+1)
            try:
                async with ctx.typing.paused():
                    raw = await self._answers.wait(request.id, self._settings.timeout_seconds)
            except asyncio.CancelledError:
                # The turn was stopped: close the request so a late press cannot look approved.
                await asyncio.shield(self._expire(request, "the request was stopped"))
                raise
            finally:
                self._pending(-1)
        if raw is None:
            raw = await self._expire(request, "no decision in time")
        decision = Decision.from_json(raw)
        return ApprovalOutcome(decision.approved, outcome_text(decision))

    # -- deciding --------------------------------------------------------------------------

    async def handle_press(self, press: ButtonPress, data: ApprovalChoice) -> PressReply:
        choice = data.choice
        if choice == "always" and not self._offers_always:
            return PressReply(toast="This button is not valid.", alert=True)
        result = await self._decide(data.request_id, press.user, press.chat, choice, "")
        if result.error:
            return PressReply(toast=result.error, alert=True)
        return PressReply(toast=result.toast, edit_text=result.edit_text)

    async def _cmd(self, call: CommandCall) -> str:
        request_id, _, reason = call.args.partition(" ")
        if not request_id:
            return f"Usage: /{call.name} ID{' [reason]' if call.name == 'deny' else ''}"
        choice: Choice = "once" if call.name == "approve" else "deny"
        chat = call.inbound.chat
        result = await self._decide(request_id.strip(), call.inbound.sender, chat, choice, reason)
        if result.error:
            return result.error
        await self._edit_prompt(result)
        return result.toast

    async def decide_as_operator(
        self, request_id: str, operator: UserRef, choice: Choice, reason: str = ""
    ) -> tuple[bool, str]:
        """A decision by someone the caller has already authorised from outside the request's
        chat: an operator signed in to the web console (`web:<name>`), or an admin pressing a
        prompt relayed to them. First decision wins as with a press; the prompt in the chat is
        edited as after a button press. Returns (decided, the toast or why not)."""
        if choice not in ("once", "session", "deny"):
            return False, "This is not a valid decision."
        request = await self._load(request_id)
        if request is None:
            return False, "This approval request is unknown or has expired."
        result = await self._record(request, operator, choice, reason)
        if result.error:
            return False, result.error
        await self._edit_prompt(result)
        return True, result.toast

    async def pending_requests(self) -> list[ApprovalRequest]:
        """Requests waiting for a decision now (for the console), oldest first."""
        found = []
        for request_id in await self._store.hgetall(PENDING):
            request = await self._load(request_id)
            if request is not None:
                found.append(request)
        return sorted(found, key=lambda r: r.created)

    async def _edit_prompt(self, result: _DecideResult) -> None:
        if result.request is not None and result.request.sent_ref is not None:
            with contextlib.suppress(Exception):
                await self._outbox.edit(
                    result.request.sent_ref,
                    Outbound(chat=result.request.chat_ref, text=result.edit_text or ""),
                )

    async def _decide(
        self, request_id: str, user: UserRef, chat: ChatRef, choice: Choice, reason: str
    ) -> _DecideResult:
        request = await self._load(request_id)
        if request is None:
            return _DecideResult(error="This approval request is unknown or has expired.")
        if chat.platform != request.chat_ref.platform or chat.chat_id != request.chat_ref.chat_id:
            return _DecideResult(error="This approval request belongs to another chat.")
        if request.chat_ref.platform in UNATTENDED and choice != "deny":
            log.info("approval refused id=%s user=%s: from the API", request.id, user.address)
            return _DecideResult(error=UNATTENDED_REFUSAL)
        existing = await self._answers.current(request.id)
        if existing is not None:
            return _DecideResult(
                error=f"Already decided: {outcome_text(Decision.from_json(existing))}."
            )
        requester = request.requester_ref
        admin_needed = request.admins_only and not self._access.is_admin(user)
        if user.is_bot or admin_needed or not self._access.may_approve(user, requester):
            log.info("approval refused id=%s user=%s", request.id, user.address)
            who = "an admin" if request.admins_only else self._access.approvers_label(requester)
            return _DecideResult(error=f"Only {who} can decide on this.")
        if choice == "always" and (refusal := self._always_refusal(user, requester)):
            return _DecideResult(error=refusal)
        return await self._record(request, user, choice, reason)

    async def _record(
        self, request: ApprovalRequest, user: UserRef, choice: Choice, reason: str
    ) -> _DecideResult:
        """Write the one decision (a later one is refused) and close the request."""
        if choice in ("session", "always") and not request.standing:
            return _DecideResult(error="This can only be approved once; it asks each time.")
        decision = Decision(choice, user.label, user.address, reason.strip())
        if not await self._answers.answer(request.id, decision.to_json()):
            current = await self._answers.current(request.id)
            text = outcome_text(Decision.from_json(current)) if current else "decided"
            return _DecideResult(error=f"Already decided: {text}.")
        if choice in ("session", "always"):
            await self._grant(request, decision, "session" if choice == "session" else "chat")
        await self._finish(request, decision)
        toast = "Approved." if decision.approved else "Denied."
        return _DecideResult(
            toast=toast, edit_text=decided_text(request, decision), request=request
        )

    @property
    def _offers_always(self) -> bool:
        return self._settings.allow_always != "off"

    def _always_refusal(self, user: UserRef, requester: UserRef) -> str | None:
        if self._access.is_admin(user):
            return None
        if self._settings.allow_always == "requester" and user.address == requester.address:
            return None
        who = (
            "an admin"
            if self._settings.allow_always == "admins"
            else f"{requester.label} or an admin"
        )
        return f"Only {who} can allow this always; approve once or for this session instead."

    async def _grant(self, request: ApprovalRequest, decision: Decision, scope: Scope) -> Grant:
        session = request.session
        place = session if scope == "session" else SessionKey.parse(session).chat_scope
        requester = request.requester_ref
        days = self._settings.always_expires_days
        until = time.time() + days * 86400 if scope == "chat" and days else 0.0
        grant = await self._grants.add(
            scope,
            place,
            owner=requester.address,
            owner_label=requester.label,
            tool=request.tool,
            shape=request.shape,
            command=request.command,
            by=decision.by_address,
            by_label=decision.by,
            until=until,
        )
        log.info(
            "approval grant id=%s scope=%s tool=%s owner=%s by=%s",
            grant.id,
            scope,
            request.tool,
            grant.owner,
            grant.by,
        )
        return grant

    async def _expire(self, request: ApprovalRequest, why: str) -> str:
        expired = Decision("expired", reason=why)
        if not await self._answers.answer(request.id, expired.to_json()):
            # Someone decided at the last moment; their decision stands.
            return await self._answers.current(request.id) or expired.to_json()
        await self._finish(request, expired)
        await self._announce(request, decided_text(request, expired))
        return expired.to_json()

    async def _announce(self, request: ApprovalRequest, text: str) -> None:
        """Show an outcome on the prompt; when the prompt cannot be edited (a crash before
        its id was saved, a deleted message), say it in a new message instead."""
        notice = Outbound(chat=request.chat_ref, text=text)
        if request.sent_ref is not None:
            try:
                await self._outbox.edit(request.sent_ref, notice)
                return
            except Exception as exc:
                log.info("approval prompt not edited id=%s error=%s", request.id, exc)
        try:
            await self._outbox.send(notice)
        except Exception as exc:
            log.warning("approval outcome not delivered id=%s error=%s", request.id, exc)

    def _pending(self, change: int) -> None:
        self._waiting += change
        self._metrics.gauge("approvals_pending", self._waiting)

    async def _finish(self, request: ApprovalRequest, decision: Decision) -> None:
        self._metrics.inc("approvals_decided_total", outcome=decision.choice)
        self._metrics.observe("approval_decision_seconds", max(time.time() - request.created, 0))
        await self._store.hdel(PENDING, request.id)
        entry = {
            "ts": time.time(),
            "id": request.id,
            "tool": request.tool,
            "command": request.command,
            "requester": request.requester_ref.address,
            "chat": request.chat_ref.address,
            "outcome": decision.choice,
            "shape": request.shape,
            "by": decision.by_address,
            "reason": decision.reason,
        }
        await self._store.push(AUDIT, json.dumps(entry), max_len=self._settings.audit_max_entries)
        log.info(
            "approval decided id=%s outcome=%s by=%s",
            request.id,
            decision.choice,
            decision.by_address or "-",
        )

    # -- showing -----------------------------------------------------------------------------

    async def _show(self, request: ApprovalRequest) -> dict[str, Any] | None:
        chat = request.chat_ref
        once = Button(
            label="Approve once", data=ApprovalChoice(request.id, "once").pack(), style="primary"
        )
        session = Button(
            label="Approve for session", data=ApprovalChoice(request.id, "session").pack()
        )
        deny = Button(label="Deny", data=ApprovalChoice(request.id, "deny").pack(), style="danger")
        always = Button(
            label="Always allow in this chat", data=ApprovalChoice(request.id, "always").pack()
        )
        offers_always = self._offers_always and request.standing
        if not request.standing:
            buttons: tuple[tuple[Button, ...], ...] = ((once, deny),)
        else:
            row = (once, session, deny)
            buttons = (row, (always,)) if offers_always else (row,)
        try:
            ref = await self._outbox.send(
                Outbound(
                    chat=chat,
                    text=prompt_text(
                        request,
                        always=offers_always,
                        always_days=self._settings.always_expires_days,
                    ),
                    buttons=buttons,
                    markdown=True,
                )
            )
        except Exception as exc:
            # The request still stands: /approve works from the chat, and timeout denies.
            log.warning("approval prompt not delivered id=%s error=%s", request.id, exc)
            return None
        return ref.model_dump(mode="json")

    # -- persistence and orphans -------------------------------------------------------------

    async def _save(self, request: ApprovalRequest) -> None:
        await self._store.run(self._save_ops(request, Batch()))

    def _save_ops(self, request: ApprovalRequest, batch: Batch) -> Batch:
        ttl = max(request.expires - time.time(), 0) + 24 * 3600
        key = keys.approval(request.id)
        return batch.set(key, self._signer.seal(_REQUEST, key, asdict(request)), ttl=ttl)

    async def _open(self, request: ApprovalRequest, ctx: ToolContext) -> None:
        """Record a new request and list it as pending; for a turn, in one store step with
        its fence check, so a run whose session was taken over asks nobody anything."""
        writes = self._save_ops(request, Batch()).hset(PENDING, request.id, str(request.expires))
        if ctx.fence is not None:
            await ctx.fence.write(writes, "approval")
        else:
            await self._store.run(writes)

    async def _load(self, request_id: str) -> ApprovalRequest | None:
        """The request, when its record verifies (a forged or altered one reads as absent)."""
        if not request_id or len(request_id) > 32:
            return None
        key = keys.approval(request_id)
        value = self._signer.open(_REQUEST, key, await self._store.get(key))
        if not isinstance(value, dict):
            return None
        try:
            return ApprovalRequest(**value)
        except TypeError:
            self._signer.report(_REQUEST, key)
            return None

    async def _heartbeat(self) -> None:
        while True:
            with contextlib.suppress(StoreUnavailable):
                await self._store.set(keys.alive(self._instance), "1", ttl=_HEARTBEAT_TTL)
            await asyncio.sleep(_HEARTBEAT_TTL / 3)

    async def _sweep_orphans(self) -> None:
        while True:
            try:
                await self.sweep_once()
            except StoreUnavailable as exc:
                log.warning("approval sweep skipped error=%s", exc)
            await asyncio.sleep(_HEARTBEAT_TTL / 2)

    async def sweep_once(self) -> int:
        """Expire requests whose waiting process is gone (restart or crash); returns how many.

        Their command never runs: the expiry is written as the request's one decision.
        """
        expired = 0
        for request_id in list(await self._store.hgetall(PENDING)):
            request = await self._load(request_id)
            if request is None:
                await self._store.hdel(PENDING, request_id)
            elif request.owner != self._instance and not await self._owner_alive(request):
                await self._expire(request, "the gateway restarted before a decision")
                expired += 1
        return expired

    async def _owner_alive(self, request: ApprovalRequest) -> bool:
        if not self._store.shared:
            return False  # single process: whoever made it is not running any more
        return await self._store.get(keys.alive(request.owner)) is not None


@dataclass(frozen=True)
class _DecideResult:
    toast: str = ""
    edit_text: str | None = None
    error: str | None = None
    request: ApprovalRequest | None = None
