"""MatrixAdapter: matrix-nio inside the gateway's event loop, end-to-end encryption included.

Events arrive by /sync, run by the holder of a leader lease when the store is shared (one
device's crypto state must advance in one process at a time); `SyncIntake` hands them to
admission and the token moves only past stored events. Buttons are offered as reactions
(adapters/matrix/prompts.py) and a reaction goes to the core as a ButtonPress.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any

from nio import AsyncClient, ProfileGetDisplayNameResponse, RoomCreateResponse, RoomPreset

from adapters.matrix.access import MatrixAccess
from adapters.matrix.client import log_in, new_client
from adapters.matrix.files import MatrixFiles
from adapters.matrix.intake import SyncIntake, remember_thread
from adapters.matrix.normalize import PLATFORM, BotIdentity
from adapters.matrix.prompts import PROMPT_TTL, ReactionPrompts, legend, reaction_keys
from adapters.matrix.sending import MATRIX_LIMIT, MatrixSender
from adapters.matrix.settings import MatrixSettings
from adapters.matrix.sync import SyncCursor, Syncer
from gateway.sdk import (
    AdapterContext,
    ButtonPress,
    Capabilities,
    ChatKind,
    ChatRef,
    DeliveryError,
    LeaderElection,
    Outbound,
    SentRef,
    StoreUnavailable,
    StreamSupport,
    keys,
)

log = logging.getLogger(__name__)

PRESS_FAILED = "Something went wrong with that reaction; please try again."
_DRAIN_SECONDS = 5.0
_STOP_STEP_SECONDS = 10.0


class MatrixAdapter:
    platform = PLATFORM

    def __init__(self, settings: MatrixSettings, ctx: AdapterContext) -> None:
        if not settings.configured:
            raise ValueError("matrix.homeserver and matrix.user_id are required for Matrix")
        self.capabilities = Capabilities(
            max_len=MATRIX_LIMIT,
            can_edit=True,
            buttons=True,
            threads=True,
            max_upload_bytes=settings.max_file_bytes,
            # Edits are events every client of the room downloads: about one a second.
            streaming=StreamSupport(interval=1.0),
        )
        self._settings = settings
        self._ctx = ctx
        self.client: AsyncClient = new_client(settings)
        self._sender = MatrixSender(self.client)
        self._files = MatrixFiles(self.client, self._sender, max_bytes=settings.max_file_bytes)
        self._prompts = ReactionPrompts(ctx.store, PLATFORM)
        self._access = MatrixAccess(settings)
        self._tasks: set[asyncio.Task[None]] = set()
        self._leader: LeaderElection | None = None
        self._syncer: Syncer | None = None
        self.me = BotIdentity(settings.user_id)
        ctx.extensions.add_access_rule(self._access.rule)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            await log_in(self.client, self._settings)
        except BaseException:
            await self.client.close()
            raise
        name = await self.client.get_displayname(self._settings.user_id)
        if isinstance(name, ProfileGetDisplayNameResponse) and name.displayname:
            self.me = BotIdentity(self._settings.user_id, name.displayname)
        intake = SyncIntake(
            self._ctx,
            self.client,
            self._sender,
            self._access,
            me=self.me,
            group_context=self._settings.group_context,
            read_receipts=self._settings.read_receipts,
            pressed=self._prompts.pressed,
            on_press=self._answer_press,
            spawn=self._spawn,
        )
        cursor = SyncCursor(self._ctx.store, self._settings.user_id)
        self._syncer = Syncer(self.client, intake, cursor, timeout=self._settings.sync_timeout)
        if self._ctx.store.shared:
            self._leader = LeaderElection(
                self._ctx.store,
                f"matrix-sync:{self._settings.user_id}",
                self._ctx.instance_id,
                ttl=self._settings.leader_ttl,
                on_elected=self._start_sync,
                on_deposed=self._stop_sync,
            )
            self._leader.start()
        else:
            await self._start_sync()
        log.info("matrix ready user=%s device=%s", self.client.user_id, self.client.device_id)

    async def stop(self) -> None:
        # Each step is bounded: a stuck request must not hold up the gateway's shutdown.
        if self._leader is not None:
            await _bounded(self._leader.stop(), "leader lease")
        await _bounded(self._stop_sync(), "sync")
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=_DRAIN_SECONDS)
        await _bounded(self._files.close(), "downloads")
        await _bounded(self.client.close(), "connections")

    @property
    def syncing(self) -> bool:
        return self._syncer is not None and self._syncer.running

    async def synced(self) -> None:
        """Wait until this replica's sync has taken its first response (for tests, doctor)."""
        assert self._syncer is not None
        await self._syncer.synced.wait()

    async def state(self) -> str:
        if self._syncer is not None and self._syncer.running:
            problem = self._syncer.problem
            return f"syncing, retrying ({problem})" if problem else "syncing"
        if self._leader is not None and not self._leader.is_leader:
            return "standby: another replica syncs; sending to unencrypted rooms works"
        return "not syncing"

    async def _start_sync(self) -> None:
        assert self._syncer is not None
        if self._syncer.running:
            return
        # Another replica may have moved the crypto state on (a shared store_path): read it
        # again so this process encrypts with the current sessions.
        self.client.store = None
        self.client.load_store()
        self._syncer.start()
        log.info("matrix sync started instance=%s", self._ctx.instance_id)

    async def _stop_sync(self) -> None:
        if self._syncer is not None and self._syncer.running:
            await self._syncer.stop()
            # The next holder moves the crypto state on; this process must not encrypt with
            # its stale copy, so it forgets the rooms (sending.py then asks each room).
            self.client.rooms.clear()
            log.info("matrix sync stopped instance=%s", self._ctx.instance_id)

    # -- the Adapter protocol --------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        if out.attachments:
            room = self.client.rooms.get(out.chat.chat_id)
            ref = await self._files.upload(out, encrypted=room is not None and room.encrypted)
        elif out.buttons:
            ref = await self._send_prompt(out)
        else:
            ref = await self._sender.send(out)
        if out.chat.thread_id and out.chat.kind is not ChatKind.DIRECT:
            # Later messages in this thread are for the bot without a mention.
            await remember_thread(self._ctx.store, out.chat.chat_id, out.chat.thread_id, PROMPT_TTL)
        return ref

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        extra = legend(reaction_keys(out.buttons)) if out.buttons else ""
        await self._sender.edit(ref, out, extra=extra)

    async def delete(self, ref: SentRef) -> None:
        await self._sender.redact(ref)

    async def typing(self, chat: ChatRef) -> None:
        await self._sender.typing(chat)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """The bytes of an attachment (Attachment.file_id: an mxc:// URL, or one with the key
        of an encrypted file); raises AttachmentTooLarge or AttachmentUnavailable."""
        return await self._files.download(file_id, max_bytes)

    async def direct_chat(self, user_id: str) -> ChatRef:
        """The room of the bot and `user_id` alone, or a new one the bot invites them to."""
        for room in self.client.rooms.values():
            if room.member_count == 2 and user_id in room.users:
                return ChatRef(platform=PLATFORM, chat_id=room.room_id, kind=ChatKind.DIRECT)
        created = await self.client.room_create(
            is_direct=True, invite=[user_id], preset=RoomPreset.trusted_private_chat
        )
        if not isinstance(created, RoomCreateResponse):
            raise DeliveryError(f"Matrix could not open a direct chat: {created}")
        return ChatRef(platform=PLATFORM, chat_id=created.room_id, kind=ChatKind.DIRECT)

    # -- prompts and presses ---------------------------------------------------------------

    async def _send_prompt(self, out: Outbound) -> SentRef:
        buttons = reaction_keys(out.buttons)
        ref = await self._sender.send(out, extra=legend(buttons))
        await self._prompts.remember(ref.message_id, buttons)
        for key in buttons:
            try:
                await self._sender.react(out.chat, ref.message_id, key)
            except DeliveryError as exc:  # the legend says which reaction to add
                log.info("matrix prompt reaction not added chat=%s error=%s", out.chat.address, exc)
        return ref

    async def _answer_press(self, press: ButtonPress) -> None:
        if not await self._first_press(press):
            return  # a redelivered event: the first delivery answered it
        try:
            reply = await self._ctx.press(press)
        except Exception:
            log.exception("matrix press failed chat=%s", press.chat.address)
            await self._tell(press, PRESS_FAILED)
            return
        if reply.edit_text is not None and not reply.alert and press.message is not None:
            try:
                await self.edit(press.message, Outbound(chat=press.chat, text=reply.edit_text))
            except DeliveryError as exc:
                log.warning("press outcome not shown chat=%s error=%s", press.chat.address, exc)
            return
        if reply.alert:
            # Matrix has no message for one person alone: the refusal goes to the room.
            await self._tell(press, f"{press.user.label}: {reply.toast}")

    async def _tell(self, press: ButtonPress, text: str) -> None:
        out = Outbound(chat=press.chat, text=text, markdown=False)
        with contextlib.suppress(DeliveryError):
            reply_to = press.message.message_id if press.message else None
            await self._sender.send(out.model_copy(update={"reply_to": reply_to}))

    async def _first_press(self, press: ButtonPress) -> bool:
        try:
            return await self._ctx.store.set(
                keys.seen("matrix-press", press.event_id), "1", ttl=3600, only_if_absent=True
            )
        except StoreUnavailable:
            # Handle it rather than drop it: a decision is first-answer-wins anyway.
            return True

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _bounded(step: Coroutine[Any, Any, None], what: str) -> None:
    try:
        await asyncio.wait_for(step, _STOP_STEP_SECONDS)
    except TimeoutError:
        log.warning("matrix stop step timed out step=%s", what)
