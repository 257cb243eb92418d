"""Approvals from chats where nobody can press a button (API sessions) go to the operators.

The console lists every pending request anyway; this relay also sends each such request once
to the configured admins (`access.admins`) in a direct message on their platform, with buttons
of its own: a press by an admin decides through `ApprovalService.decide_as_operator`, and the
prompt in the requesting chat is edited as after a press there. It watches the store's
pending requests, so a request made on any replica is relayed exactly once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from gateway.approvals.records import UNATTENDED, ApprovalRequest
from gateway.approvals.service import ApprovalService
from gateway.intake.access import AccessPolicy
from gateway.runtime.tasks import stop_task
from gateway.sdk.callbacks import CallbackData
from gateway.sdk.channels import Outbox
from gateway.sdk.extensions import Extensions
from gateway.sdk.messages import Button, ButtonPress, Outbound, PressReply
from gateway.store import keys
from gateway.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)

WATCH_EVERY = 2.0


@dataclass(frozen=True)
class RelayedChoice(CallbackData, prefix="apr"):
    """A button on a relayed approval prompt (only admins may press it)."""

    request_id: str
    choice: Literal["once", "deny"]


class ApprovalRelay:
    def __init__(
        self,
        *,
        store: Store,
        outbox: Outbox,
        approvals: ApprovalService,
        access: AccessPolicy,
        admins: Sequence[str],
        platforms: Sequence[str] = UNATTENDED,
    ) -> None:
        self._store = store
        self._outbox = outbox
        self._approvals = approvals
        self._access = access
        self._admins = list(admins)
        self._platforms = set(platforms)
        self._task: asyncio.Task[None] | None = None

    def register(self, extensions: Extensions) -> None:
        extensions.add_buttons(RelayedChoice, self._press)

    def start(self) -> None:
        self._task = asyncio.create_task(self._watch(), name="approval relay")

    async def stop(self) -> None:
        await stop_task(self._task)

    async def relay_once(self) -> int:
        """Relay every pending request from an unattended chat not relayed yet; returns how
        many were relayed by this process."""
        relayed = 0
        for request in await self._approvals.pending_requests():
            if request.chat_ref.platform not in self._platforms:
                continue
            claimed = await self._store.set(
                keys.relayed(request.id), "1", ttl=24 * 3600.0, only_if_absent=True
            )
            if claimed:
                relayed += await self._send(request)
        return relayed

    async def _watch(self) -> None:
        while True:
            try:
                await self.relay_once()
            except StoreUnavailable as exc:
                log.warning("approval relay skipped error=%s", exc)
            except Exception:
                log.exception("approval relay failed")
            await asyncio.sleep(WATCH_EVERY)

    async def _send(self, request: ApprovalRequest) -> int:
        expires = datetime.fromtimestamp(request.expires, UTC).strftime("%H:%M:%S UTC")
        text = (
            f"**Approval needed** for {request.requester_ref.address} "
            f"({request.chat_ref.platform}, {request.tool})\n"
            f"```\n{request.command}\n```\n"
            f"Why: {request.reason}\nExpires at {expires}. Request `{request.id}`."
        )
        buttons = (
            (
                Button(
                    label="Approve once",
                    data=RelayedChoice(request.id, "once").pack(),
                    style="primary",
                ),
                Button(label="Deny", data=RelayedChoice(request.id, "deny").pack(), style="danger"),
            ),
        )
        sent = 0
        for address in self._admins:
            platform, _, user_id = address.partition(":")
            if not user_id or platform in self._platforms or not self._outbox.has(platform):
                continue
            try:
                direct = await self._outbox.direct_chat(platform, user_id)
                await self._outbox.send(Outbound(chat=direct, text=text, buttons=buttons))
                sent += 1
            except Exception as exc:
                log.warning("approval not relayed id=%s to=%s error=%s", request.id, address, exc)
        log.info("approval relayed id=%s admins=%d", request.id, sent)
        return 1

    async def _press(self, press: ButtonPress, data: RelayedChoice) -> PressReply:
        if press.user.is_bot or not self._access.is_admin(press.user):
            return PressReply(toast="Only an admin can decide on this.", alert=True)
        decided, text = await self._approvals.decide_as_operator(
            data.request_id, press.user, data.choice
        )
        if not decided:
            return PressReply(toast=text, alert=True)
        outcome = "Approved" if data.choice == "once" else "Denied"
        return PressReply(
            toast=text, edit_text=f"{outcome} by {press.user.label}: request {data.request_id}."
        )
