"""The Slack adapter: slack-bolt's AsyncApp over Socket Mode or the HTTP Events API.

Socket Mode when `slack.app_token` is set, else the Events API at `/slack/events` on the
gateway's HTTP server. Scopes: app_mentions:read, chat:write, im:history (DMs),
channels:history/groups:history (thread follow-ups), reactions:write (working
indicator), commands, files:read and files:write (attachments in and out); events:
app_mention, message.im, message.channels/groups.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.access import SlackAccess
from adapters.slack.files import MAX_UPLOAD_BYTES, SlackFiles
from adapters.slack.history import SlackHistory
from adapters.slack.http_events import EventsEndpoint
from adapters.slack.indicator import WorkingIndicator
from adapters.slack.listeners import NotStored, SlackListeners
from adapters.slack.mrkdwn import to_mrkdwn
from adapters.slack.normalize import PLATFORM, BotIdentity
from adapters.slack.sending import MAX_TEXT, SlackSender, retry_handlers
from adapters.slack.settings import SlackSettings
from adapters.slack.socket_mode import SocketModeConnection
from adapters.slack.streaming import SlackStream
from adapters.slack.threads import AnsweredThreads
from gateway.sdk import (
    AdapterContext,
    AttachmentUnavailable,
    Capabilities,
    ChatRef,
    DeliveryError,
    Outbound,
    SentRef,
    StreamSupport,
    UserRef,
    stop_tasks,
)

log = logging.getLogger(__name__)

# Slack error codes that say the app or its token cannot use chat.startStream anywhere (the
# token type, scopes, authentication, a method this workspace does not have). Any other
# refusal (an archived channel, a channel the bot is not in) holds for that channel only.
APP_REFUSALS = frozenset(
    {
        "not_allowed_token_type",
        "missing_scope",
        "no_permission",
        "not_authed",
        "invalid_auth",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "access_denied",
        "team_access_not_granted",
        "ekm_access_denied",
        "unknown_method",
        "method_deprecated",
        "feature_not_enabled",
    }
)

_T = TypeVar("_T")


ACK_REACTION = "eyes"


class SlackStartError(RuntimeError):
    """The adapter cannot start: a token was refused or a setting is missing."""


class SlackAdapter:
    platform = PLATFORM
    capabilities = Capabilities(
        max_len=MAX_TEXT,
        can_edit=True,
        buttons=True,
        threads=True,
        typing=True,
        max_upload_bytes=MAX_UPLOAD_BYTES,
        # appendStream is Tier 4 (100+ a minute); chat.update, the fallback, is Tier 3.
        streaming=StreamSupport(interval=0.5, measure=lambda text: len(to_mrkdwn(text))),
    )

    def __init__(self, settings: SlackSettings, ctx: AdapterContext) -> None:
        if settings.bot_token is None:
            raise SlackStartError("slack.bot_token is not set")
        self._settings = settings
        self._ctx = ctx
        self._access = SlackAccess(settings)
        ctx.extensions.add_access_rule(self._access.rule())
        self._threads = AnsweredThreads(ctx.store, settings.thread_ttl)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False
        self._stream_methods = settings.stream_methods  # false once Slack refuses the app
        self._no_streams_in: set[str] = set()  # channels where Slack refused them
        self._session: aiohttp.ClientSession | None = None
        self._sender: SlackSender | None = None
        self._history: SlackHistory | None = None
        self._files: SlackFiles | None = None
        self._indicator: WorkingIndicator | None = None
        self._socket: SocketModeConnection | None = None
        self.app: AsyncApp | None = None
        self.bot: BotIdentity | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        self._stopped = False
        try:
            await self._start()
        except BaseException:
            await self.stop()  # the HTTP session and any socket must not outlive a failed start
            raise

    async def _start(self) -> None:
        settings = self._settings
        assert settings.bot_token is not None
        socket_mode = bool(settings.app_token and settings.app_token.get_secret_value())
        if not socket_mode and self._ctx.http is None:
            raise SlackStartError(
                "the Slack Events API needs the gateway's HTTP server (http.enabled = true), "
                "or set slack.app_token for Socket Mode"
            )
        # One pooled session for every Web API call (slack_sdk opens one per call otherwise).
        self._session = aiohttp.ClientSession()
        client = AsyncWebClient(
            token=settings.bot_token.get_secret_value(),
            base_url=settings.api_url,
            session=self._session,
            retry_handlers=retry_handlers(
                settings.send_retries,
                settings.max_retry_after,
                lambda: self._ctx.metrics.inc("platform_rate_limited_total", platform=PLATFORM),
            ),
        )
        self.bot = await self._identify(client)
        self._sender = SlackSender(client)
        self._history = SlackHistory(client, self.bot)
        self._files = SlackFiles(
            client,
            self._session,
            self._sender,
            token=settings.bot_token.get_secret_value(),
            api_url=settings.api_url,
        )
        self._indicator = WorkingIndicator(self._sender, settings.working_reaction)
        secret = settings.signing_secret.get_secret_value() if settings.signing_secret else ""
        self.app = AsyncApp(
            client=client,
            signing_secret=secret,
            # Socket Mode envelopes are not signed; bolt skips the check for them anyway.
            request_verification_enabled=not socket_mode,
            # Acknowledge (HTTP 200 or the Socket Mode ack) only after the listener stored the
            # message: a replica that dies before then leaves the event for Slack to retry.
            process_before_response=True,
            logger=logging.getLogger("slack_bolt"),
        )
        self.app.error(_on_listener_error)
        SlackListeners(
            ctx=self._ctx,
            settings=settings,
            bot=self.bot,
            sender=self._sender,
            threads=self._threads,
            history=self._history,
            indicator=self._indicator,
            access=self._access,
            spawn=self._spawn,
        ).register(self.app)
        if socket_mode:
            assert settings.app_token is not None
            self._socket = SocketModeConnection(self.app, settings.app_token.get_secret_value())
            await self._socket.start()
        else:
            assert self._ctx.http is not None
            EventsEndpoint(self.app, secret).mount(self._ctx.http)
        log.info(
            "slack adapter ready mode=%s team=%s bot=%s",
            "socket" if socket_mode else "events_api",
            self.bot.team_id,
            self.bot.user_id,
        )

    async def state(self) -> str:
        if self._stopped:
            return "stopped"
        if self._socket is None:
            return "receiving events over HTTP (Events API)"
        if await self._socket.connected():
            return "connected (Socket Mode)"
        return "Socket Mode connection down; the SDK reconnects"

    async def stop(self) -> None:
        # Sends from turns still finishing now fail as DeliveryError, not on a closed session.
        self._stopped = True
        self._sender = None
        self._files = None
        self._indicator = None
        if self._socket is not None:
            await self._socket.stop()
            self._socket = None
        tasks = list(self._tasks)
        await stop_tasks(tasks)
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _identify(self, client: AsyncWebClient) -> BotIdentity:
        try:
            auth = await client.auth_test()
        except SlackApiError as exc:
            code = exc.response.get("error") or f"http_{exc.response.status_code}"
            raise SlackStartError(
                f"Slack refused the bot token ({code}); check CHATGATE_SLACK__BOT_TOKEN (xoxb-...)"
            ) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise SlackStartError(
                f"cannot reach Slack at {self._settings.api_url} ({type(exc).__name__})"
            ) from None
        return BotIdentity(
            user_id=str(auth.get("user_id", "")),
            bot_id=str(auth.get("bot_id", "")),
            team_id=str(auth.get("team_id", "")),
        )

    # -- the Adapter protocol ------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        sender = _started(self._sender)
        if out.attachments:  # a file share in the thread (files cannot be ephemeral)
            ref = await _started(self._files).upload(out)
            await self._threads.remember(out.chat)
            return ref
        if out.ephemeral_to:
            return await sender.post_ephemeral(out, out.ephemeral_to)
        ref = await sender.post(out)
        await self._threads.remember(out.chat)
        if out.reply_to:
            await _started(self._indicator).answered(out.chat, out.reply_to)
        return ref

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        await _started(self._sender).update(ref, out)

    async def delete(self, ref: SentRef) -> None:
        await _started(self._sender).delete(ref)

    def open_stream(
        self, chat: ChatRef, *, reply_to: str | None, recipient: UserRef | None
    ) -> SlackStream | None:
        """The stream methods in the thread being answered; None elsewhere: post and edit."""
        if not self._stream_methods or chat.thread_id is None or self._sender is None:
            return None
        if chat.chat_id in self._no_streams_in:
            return None

        async def started(ref: SentRef) -> None:
            await self._threads.remember(chat)
            if reply_to and self._indicator is not None:
                await self._indicator.answered(chat, reply_to)

        def refused(code: str) -> None:
            self._streams_refused(code, chat.chat_id)

        return SlackStream(self._sender, chat, recipient, started=started, refused=refused)

    def _streams_refused(self, code: str, channel: str) -> None:
        """After a refusal, replies stream by chat.update: everywhere when the app or its
        token cannot use the methods, else in that channel only."""
        if code in APP_REFUSALS:
            if self._stream_methods:
                log.warning(
                    "slack refused the chat streaming methods (%s); streaming by chat.update",
                    code,
                )
            self._stream_methods = False
        elif channel not in self._no_streams_in:
            log.warning(
                "slack refused the chat streaming methods in %s (%s); chat.update there",
                channel,
                code,
            )
            self._no_streams_in.add(channel)

    async def typing(self, chat: ChatRef) -> None:
        if self._indicator is not None:
            await self._indicator.show(chat)

    async def read_history(
        self, chat: ChatRef, *, max_messages: int, max_chars: int
    ) -> tuple[str, ...]:
        """The thread's messages when the chat is a thread, else the channel's newest."""
        history = _started(self._history)
        if chat.thread_id:
            return await history.thread(
                chat.chat_id,
                chat.thread_id,
                None,
                max_messages=max_messages,
                max_chars=max_chars,
            )
        return await history.channel(chat.chat_id, max_messages=max_messages, max_chars=max_chars)

    async def acknowledge(self, chat: ChatRef, message_id: str) -> None:
        """A reaction on a message the running turn took in (needs reactions:write)."""
        await _started(self._sender).react(chat.chat_id, message_id, ACK_REACTION, add=True)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        """A file someone shared (its Slack file id), fetched with the bot token."""
        if self._files is None:
            raise AttachmentUnavailable("the Slack adapter is not running")
        return await self._files.download(file_id, max_bytes or MAX_UPLOAD_BYTES)

    # -- helpers -------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run listener work after the ack; keep a reference so it is neither lost nor leaked."""
        if self._stopped:  # e.g. a turn's cleanup callback firing during shutdown
            work.close()
            return
        task = asyncio.create_task(self._logged(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _logged(work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except DeliveryError:
            pass  # already logged with its Slack error code
        except Exception:
            log.exception("slack handler failed")


def _started(part: _T | None) -> _T:
    if part is None:
        raise DeliveryError("the Slack adapter is not started")
    return part


async def _on_listener_error(error: Exception, body: dict[str, Any]) -> None:
    """Bolt answers 500 (HTTP) or leaves the envelope unacknowledged (Socket Mode): Slack
    sends the event again. A store outage is expected and logged in one line."""
    if isinstance(error, NotStored):
        log.warning("slack event not stored; Slack will send it again event=%s", error)
        return
    log.error("slack listener failed event=%s", body.get("event_id"), exc_info=error)
