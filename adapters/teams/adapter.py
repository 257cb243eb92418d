"""The Teams adapter: Bot Framework activities in at the messaging endpoint, replies out
through the Bot Connector at each conversation's serviceUrl.

Every replica serves the endpoint; a message is stored before Teams gets its 200, and a
store outage answers 503 so the Bot Framework sends the activity again. Card submits
(approvals) and file consent answers are acknowledged at once and handled in a task.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
from aiohttp import web
from microsoft_agents.activity import Activity

from adapters.teams.access import TeamsAccess
from adapters.teams.auth import ActivityAuth
from adapters.teams.connector import TeamsConnector
from adapters.teams.conversations import Conversation, Conversations, trusted_service_url
from adapters.teams.endpoint import MessagingEndpoint
from adapters.teams.files import MAX_UPLOAD_BYTES, TeamsFiles
from adapters.teams.normalize import (
    PLATFORM,
    button_press,
    chat_of,
    message_inbound,
    sender_of,
    submitted_data,
    tenant_of,
)
from adapters.teams.sending import MAX_TEXT, TeamsSender
from adapters.teams.settings import TeamsSettings
from adapters.teams.streaming import TeamsStream
from adapters.teams.token import BotToken, Certificate
from gateway.sdk import (
    AdapterContext,
    AttachmentUnavailable,
    ButtonPress,
    Capabilities,
    ChatKind,
    ChatRef,
    DeliveryError,
    Outbound,
    SentRef,
    Status,
    StoreUnavailable,
    StreamSupport,
    UserRef,
    stop_tasks,
)

log = logging.getLogger(__name__)

_T = TypeVar("_T")
FILE_CONSENT = "fileConsent/invoke"


class TeamsStartError(RuntimeError):
    """The adapter cannot start: a setting is missing or the HTTP server is off."""


class TeamsAdapter:
    platform = PLATFORM
    capabilities = Capabilities(
        max_len=MAX_TEXT,
        can_edit=True,
        buttons=True,
        threads=True,
        typing=True,
        max_upload_bytes=MAX_UPLOAD_BYTES,
        # The Bot Connector allows a few edits a second per conversation; Microsoft asks
        # streaming bots for at most one update a second.
        streaming=StreamSupport(interval=1.5),
    )

    def __init__(self, settings: TeamsSettings, ctx: AdapterContext) -> None:
        if not settings.app_id:
            raise TeamsStartError("teams.app_id is not set")
        self._settings = settings
        self._ctx = ctx
        self._access = TeamsAccess(settings)
        ctx.extensions.add_access_rule(self._access.rule())
        self._conversations = Conversations(
            ctx.store,
            ctx.signer,
            settings.conversation_ttl,
            allow_local=settings.allow_local_urls,
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False
        self._session: aiohttp.ClientSession | None = None
        self._connector: TeamsConnector | None = None
        self._sender: TeamsSender | None = None
        self._files: TeamsFiles | None = None
        self._auth: ActivityAuth | None = None
        self._mounted = False
        self._native_streams = settings.native_streaming  # false once Teams refuses them

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        settings = self._settings
        if self._ctx.http is None:
            raise TeamsStartError(
                "Teams posts activities to the gateway's HTTP server; set http.enabled = true"
            )
        certificate = None
        if settings.certificate_path is not None:
            try:
                certificate = Certificate(settings.certificate_path)
            except (OSError, ValueError) as exc:
                raise TeamsStartError(
                    f"cannot use teams.certificate_path ({type(exc).__name__}); it must be a PEM "
                    "file with the certificate and its unencrypted private key"
                ) from None
        secret = settings.app_password.get_secret_value() if settings.app_password else None
        self._stopped = False
        self._session = aiohttp.ClientSession()
        token = BotToken(
            self._session,
            token_url=settings.resolved_token_url,
            client_id=settings.app_id,
            scope=settings.token_scope,
            secret=secret,
            certificate=certificate,
        )
        self._connector = TeamsConnector(
            token,
            self._conversations,
            retries=settings.send_retries,
            max_retry_after=settings.max_retry_after,
            on_rate_limited=lambda: self._ctx.metrics.inc(
                "platform_rate_limited_total", platform=PLATFORM
            ),
        )
        self._sender = TeamsSender(self._connector)
        self._files = TeamsFiles(
            self._session,
            token,
            self._conversations,
            self._sender,
            self._ctx.store,
            self._ctx.signer,
            settings.file_offer_ttl,
        )
        self._auth = ActivityAuth(
            self._session,
            metadata_url=settings.openid_metadata_url,
            issuer=settings.issuer,
            app_id=settings.app_id,
        )
        if not self._mounted:  # routes cannot be removed from a running aiohttp app
            MessagingEndpoint(lambda: self._auth, self._receive).mount(
                self._ctx.http, settings.endpoint_path
            )
            self._mounted = True
        log.info("teams adapter ready path=%s app=%s", settings.endpoint_path, settings.app_id)

    async def state(self) -> str:
        return "stopped" if self._stopped else "receiving activities over HTTP"

    async def stop(self) -> None:
        self._stopped = True
        self._auth = None
        self._sender = None
        self._files = None
        tasks = list(self._tasks)
        await stop_tasks(tasks)
        if self._connector is not None:
            await self._connector.close()
            self._connector = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the Adapter protocol ------------------------------------------------------------

    async def send(self, out: Outbound) -> SentRef:
        if out.attachments:
            return await _started(self._files).send(out)
        return await _started(self._sender).post(out)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        await _started(self._sender).update(ref, out)

    async def delete(self, ref: SentRef) -> None:
        await _started(self._sender).delete(ref)

    def open_stream(
        self, chat: ChatRef, *, reply_to: str | None, recipient: UserRef | None
    ) -> TeamsStream | None:
        """Teams' own streaming in personal chats; None elsewhere: post and update."""
        if not self._native_streams or chat.kind is not ChatKind.DIRECT or self._sender is None:
            return None
        return TeamsStream(self._sender, chat, self._streams_refused)

    def _streams_refused(self, detail: str) -> None:
        # A bot or tenant without streaming says so on the first chunk of every reply;
        # asking once is enough. A stream the person stopped is refused the same way, so
        # only "not enabled" turns streaming off for good.
        if "not enabled" in detail.lower():
            log.warning("teams refused streaming; replies are posted and updated instead")
            self._native_streams = False

    async def direct_chat(self, user_id: str) -> ChatRef:
        """The personal chat with `user_id`, known once they wrote to the bot there (Teams
        opens one only through the app being installed for them)."""
        conversation = await self._conversations.personal_chat(user_id)
        if conversation is None:
            raise DeliveryError(
                f"teams:{user_id} has not written to the bot in a personal chat yet",
                permanent=True,
            )
        where = await self._conversations.find(conversation)
        return ChatRef(
            platform=PLATFORM, chat_id=conversation, kind=ChatKind.DIRECT, space_id=where.tenant_id
        )

    async def typing(self, chat: ChatRef) -> None:
        await _started(self._sender).typing(chat)

    async def download(self, file_id: str, max_bytes: int | None = None) -> bytes:
        if self._files is None:
            raise AttachmentUnavailable("the Teams adapter is not running")
        return await self._files.download(file_id, max_bytes or MAX_UPLOAD_BYTES)

    # -- activities ----------------------------------------------------------------------

    async def _receive(self, activity: Activity) -> web.Response:
        """What Teams gets for an authenticated activity."""
        if self._stopped or self._sender is None:
            return web.json_response({"error": "not running"}, status=503)
        if not self._access.tenant_allowed(tenant_of(activity)):
            log.warning("teams activity from a tenant not allowed tenant=%s", tenant_of(activity))
            return web.json_response({"error": "tenant not allowed"}, status=403)
        try:
            chat = chat_of(activity)
        except ValueError:
            return web.json_response({"error": "malformed activity"}, status=400)
        assert activity.service_url is not None
        if not trusted_service_url(
            activity.service_url, allow_local=self._settings.allow_local_urls
        ):
            log.warning("teams activity with a serviceUrl that is not HTTPS refused")
            return web.json_response({"error": "untrusted serviceUrl"}, status=403)
        try:
            await self._conversations.remember(
                chat.chat_id,
                Conversation(service_url=activity.service_url, tenant_id=chat.space_id),
            )
            if chat.kind is ChatKind.DIRECT and activity.type == "message":
                person = sender_of(activity)
                await self._conversations.remember_person(person.user_id, chat.chat_id)
        except ValueError:
            return web.json_response({"error": "malformed activity"}, status=400)
        except StoreUnavailable as exc:
            log.warning("teams activity not stored; Teams will send it again error=%s", exc)
            return web.json_response({"error": "store unavailable"}, status=503)
        if activity.type == "message":
            return await self._message(activity)
        if activity.type == "invoke" and activity.name == FILE_CONSENT:
            files = _started(self._files)
            self._spawn(files.answer_consent(chat, activity.reply_to_id, activity.value))
            return web.json_response({"status": 200})
        return web.Response(status=200)  # conversation updates, reactions, other invokes

    async def _message(self, activity: Activity) -> web.Response:
        recipient = activity.recipient.id if activity.recipient else None
        if activity.from_property is not None and activity.from_property.id == recipient:
            return web.Response(status=200)  # the bot's own message
        data = submitted_data(activity)
        if data is not None:
            try:
                press = button_press(activity, data)
            except ValueError:
                return web.json_response({"error": "malformed activity"}, status=400)
            self._spawn(self._press(press))
            return web.Response(status=200)
        try:
            inbound = message_inbound(activity)
        except ValueError:
            return web.json_response({"error": "malformed activity"}, status=400)
        if not inbound.event_id or (not inbound.text and not inbound.attachments):
            return web.Response(status=200)
        result = await self._ctx.submit(inbound)
        if result.status is Status.UNAVAILABLE:
            log.warning("teams message not stored; Teams will send it again")
            return web.json_response({"error": "store unavailable"}, status=503)
        return web.Response(status=200)

    async def _press(self, press: ButtonPress) -> None:
        sender = _started(self._sender)
        refusal = self._access.refusal(press.chat, press.user.user_id)
        if refusal is not None:
            await sender.post(Outbound(chat=press.chat, text=refusal))
            return
        reply = await self._ctx.press(press)
        if reply.alert or reply.edit_text is None or press.message is None:
            # Teams has no message only the presser sees: the notice goes to the chat.
            if reply.toast:
                notice = f"{press.user.label}: {reply.toast}"
                await sender.post(Outbound(chat=press.chat, text=notice))
            return
        await sender.update(press.message, Outbound(chat=press.chat, text=reply.edit_text))

    # -- helpers -------------------------------------------------------------------------

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        if self._stopped:
            work.close()
            return
        task = asyncio.create_task(self._logged(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _logged(work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except DeliveryError as exc:
            log.warning("teams delivery failed error=%s", exc)
        except Exception:
            log.exception("teams handler failed")


def _started(part: _T | None) -> _T:
    if part is None:
        raise DeliveryError("the Teams adapter is not started")
    return part
