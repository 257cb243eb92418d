"""The Mattermost adapter: receives on the WebSocket in one process, sends over REST from any.

Only the holder of the "mattermost" leader lease keeps the WebSocket open (another process
takes over when it goes). Every replica serves the slash command and the button callbacks
(endpoints.py). A post is written down the moment it arrives (received.py), then submitted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

from adapters.mattermost.access import MattermostAccess
from adapters.mattermost.api import FileTooLarge, MattermostAPI, MattermostError
from adapters.mattermost.buttons import ActionSigner
from adapters.mattermost.endpoints import MattermostEndpoints
from adapters.mattermost.normalize import (
    PLATFORM,
    BotIdentity,
    NotAPost,
    clean_text,
    is_ignored,
    is_mentioned,
    post_chat,
    post_inbound,
    posted_post,
)
from adapters.mattermost.received import SocketPosition
from adapters.mattermost.sending import MAX_LEN, MattermostSender
from adapters.mattermost.settings import MattermostSettings
from adapters.mattermost.websocket import EventStream, websocket_url
from gateway.sdk import (
    AdapterContext,
    AttachmentTooLarge,
    AttachmentUnavailable,
    ButtonPress,
    Capabilities,
    ChatKind,
    ChatRef,
    DeliveryError,
    LeaderElection,
    Outbound,
    PressReply,
    ReceivedJournal,
    SentRef,
    Status,
    StoreUnavailable,
    StreamSupport,
    crash_point,
    keys,
    stop_tasks,
)

log = logging.getLogger(__name__)

_CHANNEL_KINDS = {"D": ChatKind.DIRECT, "G": ChatKind.GROUP}


class MattermostStartError(RuntimeError):
    """The adapter cannot start: the server or the token was refused, or the team is unknown."""


class MattermostAdapter:
    platform = PLATFORM

    def __init__(self, settings: MattermostSettings, ctx: AdapterContext) -> None:
        if settings.token is None or not settings.token.get_secret_value() or not settings.url:
            raise MattermostStartError("mattermost.url and mattermost.token must both be set")
        self._settings = settings
        self._ctx = ctx
        token = settings.token.get_secret_value()
        self.capabilities = Capabilities(
            max_len=MAX_LEN,
            can_edit=True,
            buttons=bool(settings.public_url) and ctx.http is not None,
            threads=True,
            max_upload_bytes=settings.max_file_bytes,
            # Post, then edit the post: one edit a second by default (streaming.interval_ms).
            streaming=StreamSupport(interval=1.0),
        )
        self._api = MattermostAPI(
            settings.url,
            token,
            on_rate_limited=lambda: ctx.metrics.inc(
                "platform_rate_limited_total", platform=PLATFORM
            ),
        )
        secret = settings.action_secret.get_secret_value() if settings.action_secret else ""
        self._signer = ActionSigner.from_settings(secret, token)
        self._access = MattermostAccess(settings)
        ctx.extensions.add_access_rule(self._access.rule)
        self._received = ReceivedJournal(
            ctx.store, ctx.submit, key=keys.MATTERMOST_RECEIVED, what="mattermost post"
        )
        self._position = SocketPosition(ctx.store)
        self._sender: MattermostSender | None = None
        self._stream: EventStream | None = None
        self._keeper: asyncio.Task[None] | None = None  # saves the socket's position
        self._leader: LeaderElection | None = None
        self._kinds: dict[str, ChatKind] = {}  # channel id -> its kind (never changes)
        self._tasks: set[asyncio.Task[None]] = set()
        self.bot: BotIdentity | None = None
        self.team_id = ""
        self.ready = asyncio.Event()  # set while this process's WebSocket is connected
        command = settings.command_token.get_secret_value() if settings.command_token else ""
        self._endpoints = MattermostEndpoints(
            ctx=ctx,
            access=self._access,
            signer=self._signer,
            command_token=command,
            channel_kind=self.channel_kind,
            after_press=self._show_late,
            spawn=self._spawn,
        )
        if ctx.http is not None:
            self._endpoints.mount()
            ctx.http.add_readiness_check(PLATFORM, self._readiness)

    @property
    def receiving(self) -> bool:
        """This process holds the WebSocket (it is the leader)."""
        return self._stream is not None

    async def state(self) -> str:
        if self._stream is not None:
            return "connected to the WebSocket" if self.ready.is_set() else "connecting"
        if self._leader is not None and not self._leader.is_leader:
            return "standby: another replica holds the WebSocket; sending works"
        return "not connected to the WebSocket"

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException:
            await self._api.close()
            raise

    async def _start(self) -> None:
        try:
            me = await self._api.me()
            if self._settings.team:
                self.team_id = str((await self._api.team_by_name(self._settings.team))["id"])
        except MattermostError as exc:
            if exc.status == 401:
                raise MattermostStartError(
                    "Mattermost refused mattermost.token; use the bot account's access token "
                    "(Integrations > Bot Accounts)"
                ) from None
            if exc.status == 404:
                raise MattermostStartError(
                    f"Mattermost has no team named {self._settings.team!r} the bot can see; "
                    "check mattermost.team and that the bot is a member"
                ) from None
            raise MattermostStartError(
                f"cannot reach Mattermost at {self._settings.url}: {exc}"
            ) from None
        self.bot = BotIdentity(user_id=str(me["id"]), username=str(me.get("username", "")))
        self._sender = MattermostSender(
            self._api, self.bot.user_id, self._signer, self._settings.public_url
        )
        self._leader = LeaderElection(
            self._ctx.store,
            PLATFORM,
            self._ctx.instance_id,
            ttl=self._settings.leader_ttl,
            on_elected=self._connect,
            on_deposed=self._disconnect,
        )
        self._leader.start()
        log.info("mattermost adapter ready bot=%s team=%s", self.bot.username, self.team_id)

    async def stop(self) -> None:
        if self._leader is not None:
            await self._leader.stop()  # disconnects and releases the lease for a quick takeover
            self._leader = None
        await self._disconnect()
        tasks = list(self._tasks)
        await stop_tasks(tasks)
        self._sender = None
        await self._api.close()

    async def _connect(self) -> None:
        stream = EventStream(
            self._api.session,
            websocket_url(self._settings.url),
            self._api.auth_headers,
            self._on_event,
            self.ready,
            resume_from=await self._position.load(),
        )
        self._stream = stream
        stream.start()
        self._spawn(self._replay_received())
        self._keeper = asyncio.create_task(self._position.keep(stream))

    async def _disconnect(self) -> None:
        stream, self._stream = self._stream, None
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            await asyncio.gather(keeper, return_exceptions=True)
        if stream is not None:
            await stream.stop()
            await self._position.save(stream)

    async def _replay_received(self) -> None:
        """What a replica that held the socket before received and never stored."""
        try:
            await self._received.replay()
        except StoreUnavailable as exc:  # left noted: the next replica to connect replays it
            log.warning("mattermost receipts not replayed error=%s", exc)

    async def _readiness(self) -> str | None:
        if self._stream is not None and not self.ready.is_set():
            return "mattermost websocket not connected"
        return None

    # -- the Adapter protocol --------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        sender = self._running()
        if out.attachments:
            return await sender.send_files(out)
        return await sender.send(out)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        await self._running().edit(ref, out)

    async def delete(self, ref: SentRef) -> None:
        await self._running().delete(ref)

    async def typing(self, chat: ChatRef) -> None:
        await self._running().typing(chat)

    async def direct_chat(self, user_id: str) -> ChatRef:
        return await self._running().direct_chat(user_id)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """A file someone posted (its file id), from /api/v4/files with the bot token."""
        if not file_id.isalnum():
            raise AttachmentUnavailable("not a Mattermost file id")
        limit = max_bytes or self._settings.max_file_bytes
        try:
            return await self._api.read_file(file_id, limit)
        except FileTooLarge as exc:
            raise AttachmentTooLarge(str(exc)) from None
        except MattermostError as exc:
            raise AttachmentUnavailable(f"Mattermost would not give the file: {exc}") from None
        except (OSError, TimeoutError) as exc:
            raise AttachmentUnavailable(f"Mattermost file download failed: {exc}") from None

    async def channel_kind(self, channel_id: str) -> ChatKind:
        """A channel's kind (DM, group DM, channel), asked once per channel."""
        found = self._kinds.get(channel_id)
        if found is not None:
            return found
        try:
            channel = await self._api.channel(channel_id)
        except MattermostError as exc:
            log.warning("mattermost channel lookup failed channel=%s error=%s", channel_id, exc)
            return ChatKind.CHANNEL
        kind = _CHANNEL_KINDS.get(str(channel.get("type")), ChatKind.CHANNEL)
        self._kinds[channel_id] = kind
        return kind

    # -- events from the WebSocket ---------------------------------------------------------

    async def _on_event(self, event: dict[str, Any]) -> None:
        if event.get("event") != "posted" or self.bot is None:
            return
        data = event.get("data")
        if not isinstance(data, dict):
            return
        try:
            post = posted_post(data)
        except NotAPost as exc:
            log.warning("mattermost posted event skipped reason=%s", exc)
            return
        if is_ignored(post, self.bot):
            return
        team_id = str(data.get("team_id") or "")
        if self.team_id and team_id and team_id != self.team_id:
            return  # another team's channel: this bot answers in mattermost.team only
        channel_type = str(data.get("channel_type") or "")
        kind = _CHANNEL_KINDS.get(channel_type, ChatKind.CHANNEL)
        self._kinds.setdefault(str(post["channel_id"]), kind)
        chat = post_chat(
            post, channel_type, team_id, reply_in_thread=self._settings.reply_in_thread
        )
        if chat.kind is not ChatKind.DIRECT and not is_mentioned(post, data, self.bot):
            return  # people talking among themselves are not the bot's business
        text = clean_text(str(post.get("message", "")), self.bot)
        inbound = post_inbound(post, chat, str(data.get("sender_name") or ""), text)
        # Written down before anything else: Mattermost never sends this post again.
        try:
            await self._received.note(inbound)
        except StoreUnavailable as exc:
            log.error(
                "mattermost post not recorded on receipt event=%s error=%s", inbound.event_id, exc
            )
        crash_point("mattermost_received")
        submitted = await self._ctx.submit(inbound)
        if submitted.status is not Status.UNAVAILABLE:  # else left noted for a replay
            await self._received.done(inbound)

    # -- presses answered after the HTTP response ------------------------------------------

    async def _show_late(self, press: ButtonPress, reply: PressReply) -> None:
        sender = self._sender
        if sender is None:
            return
        try:
            if not reply.alert and reply.edit_text is not None and press.message is not None:
                await sender.edit(press.message, Outbound(chat=press.chat, text=reply.edit_text))
            elif reply.toast:
                await sender.send(
                    Outbound(chat=press.chat, text=reply.toast, ephemeral_to=press.user.user_id)
                )
        except DeliveryError:
            pass  # logged by the sender

    def _running(self) -> MattermostSender:
        if self._sender is None:
            raise DeliveryError("the Mattermost adapter is not running")
        return self._sender

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
