"""The web chat's pages and calls at /chat: sign-in (a token or a one-time link), the chat page,
its live event stream, sending messages and files, pressing buttons, fetching files.

Everything needs a signed-in browser; every call that changes something carries the
session's CSRF token in the `X-CSRF-Token` header (the page's script sends it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any

from aiohttp import BodyPartReader, web

from adapters.web.adapter import NOTICES, WebAdapter, chat_of, live_key, person, view
from gateway.sdk import AdapterContext, Attachment, ButtonPress, Inbound, SentRef, SessionKey
from gateway.sdk.media import WEB_IMAGES, kind_of, safe_name, sniff
from gateway.sdk.webkit import (
    SECURITY_HEADERS,
    TOO_MANY,
    BrowserSession,
    ChatMessage,
    SignIn,
    Templates,
    WebSettings,
    auth,
    gone,
    new_id,
    page,
    redirect,
    static_handler,
)

log = logging.getLogger(__name__)

ROOT = "/chat"
COOKIE = "chatgate_chat"
HERE = Path(__file__).parent
KEEPALIVE = 15.0
CHECK_EVERY = 1.0  # seconds between looks at whether the browser is still there
MAX_FILES = 10
MAX_TEXT_BYTES = 1_000_000


class WebChatSite:
    def __init__(self, adapter: WebAdapter, settings: WebSettings, ctx: AdapterContext) -> None:
        self._adapter = adapter
        self._settings = settings
        self._ctx = ctx
        self._templates = Templates(HERE / "templates")
        self._signin = SignIn(
            root=ROOT,
            kind="chat",
            cookie=COOKIE,
            heading="chatgate",
            owner=auth.Credentials(settings).chat_user,
            store=ctx.store,
            signer=ctx.signer,
            settings=settings,
            templates=self._templates,
        )
        self._links = auth.SignInLinks(ctx.store, settings.link_hours, ctx.signer)
        self._max_upload = int(settings.max_upload_mb * 1_000_000)

    def add_routes(self, http: Any) -> None:
        add = http.add_route
        add("GET", ROOT, self._page)
        add("GET", f"{ROOT}/", self._page)
        add("GET", f"{ROOT}/login", self._signin.form)
        add("POST", f"{ROOT}/login", self._signin.submit)
        add("GET", f"{ROOT}/link/{{code}}", self._link)
        add("POST", f"{ROOT}/logout", self._logout)
        add("GET", f"{ROOT}/events", self._events)
        add("POST", f"{ROOT}/send", self._send)
        add("POST", f"{ROOT}/press", self._press)
        add("GET", f"{ROOT}/files/{{id}}", self._file)
        add("GET", f"{ROOT}/static/{{name}}", static_handler((HERE / "static",)))

    # -- signing in -----------------------------------------------------------------------------

    async def _signed_in(self, request: web.Request) -> BrowserSession | None:
        return await self._signin.session(request)

    async def _link(self, request: web.Request) -> web.StreamResponse:
        client = self._signin.client(request)
        if not await self._signin.limiter.allow(client):
            return self._signin.page(TOO_MANY, 429)
        user = await self._links.redeem(request.match_info["code"])
        if user is None:
            return self._signin.page("This sign-in link was used already or has expired.", 403)
        return await self._signin.start(user, client)

    async def _logout(self, request: web.Request) -> web.StreamResponse:
        data = await request.post()
        await self._checked(request, {k: v for k, v in data.items() if isinstance(v, str)})
        return await self._signin.end(request)

    async def _checked(self, request: web.Request, form: dict[str, str] | None = None) -> str:
        """The signed-in user of a call that changes something (CSRF checked); raises else."""
        session = await self._signed_in(request)
        if session is None:
            raise web.HTTPUnauthorized(text="Sign in first.", headers=SECURITY_HEADERS)
        if not auth.csrf_ok(request, session, form or {}):
            log.warning("web chat call refused without a valid CSRF token user=%s", session.name)
            raise web.HTTPForbidden(
                text="This page has expired; reload it.", headers=SECURITY_HEADERS
            )
        return session.name

    # -- the page and its events ----------------------------------------------------------------

    async def _page(self, request: web.Request) -> web.StreamResponse:
        session = await self._signed_in(request)
        if session is None:
            return redirect(f"{ROOT}/login")
        user = session.name
        conversations = await self._adapter.conversations.all(user)
        wanted = request.query.get("c", "")
        current = next((c.id for c in conversations if c.id == wanted), "")
        if not current and not wanted and conversations:
            current = conversations[0].id
        heading = next((c.title for c in conversations if c.id == current), "New conversation")
        html = self._templates.render(
            "chat.html",
            title="Chat",
            static=f"{ROOT}/static",
            user=user,
            csrf=session.csrf,
            conversations=conversations,
            current=current,
            heading=heading,
            root=ROOT,
            max_upload=self._max_upload,
        )
        return page(html)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the conversation's messages, then every change as it happens."""
        session = await self._signed_in(request)
        if session is None:
            raise web.HTTPUnauthorized(headers=SECURITY_HEADERS)
        user = session.name
        conversation = request.query.get("c", "")
        response = web.StreamResponse(
            headers={
                **SECURITY_HEADERS,
                "Content-Type": "text/event-stream",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        self._adapter.watching += 1
        # Subscribe first, then read the store: nothing sent in between is missed.
        with self._adapter.streams.track(), self._adapter.hub.subscribe(live_key(user)) as events:
            try:
                messages: list[ChatMessage] = []
                if conversation:
                    messages = await self._adapter.messages.all(chat_of(user, conversation).address)
                snapshot = {"conversation": conversation, "messages": [view(m) for m in messages]}
                await response.write(_sse("snapshot", snapshot))
                quiet = 0.0
                while not gone(request):
                    try:
                        event = await asyncio.wait_for(events.get(), CHECK_EVERY)
                    except TimeoutError:
                        quiet += CHECK_EVERY
                        if quiet >= KEEPALIVE:
                            quiet = 0.0
                            if await self._signed_in(request) is None:
                                await response.write(_sse("signedout", {}))
                                break
                            await response.write(b": keepalive\n\n")
                        continue
                    await response.write(_sse(str(event.get("type", "message")), event))
            except (ConnectionResetError, asyncio.CancelledError):
                pass
            finally:
                self._adapter.watching -= 1
        return response

    # -- sending and pressing --------------------------------------------------------------------

    async def _send(self, request: web.Request) -> web.StreamResponse:
        user = await self._checked(request)
        if not request.content_type.startswith("multipart/"):
            return _json({"error": "send the message as multipart/form-data"}, 400)
        fields, uploads = await self._read_form(request)
        text = fields.get("text", "").strip()
        if not text and not uploads:
            return _json({"error": "the message is empty"}, 400)
        conversation = fields.get("conversation", "")
        if conversation and await self._adapter.conversations.get(user, conversation) is None:
            return _json({"error": "there is no such conversation"}, 404)
        if uploads:  # files are kept only for people who may use the bot
            probe = Inbound(
                event_id="web:access",
                chat=chat_of(user, conversation or "-"),
                sender=person(user),
                text=text,
            )
            if (reason := self._ctx.refusal(probe)) is not None:
                log.info("web upload refused user=%s files=%d", user, len(uploads))
                return _json({"error": reason}, 403)
        if not conversation:
            title = text or (uploads[0][0] if uploads else "")
            conversation = (await self._adapter.conversations.create(user, title)).id
        files = []
        attachments = []
        for name, mime, data in uploads:
            ref = await self._adapter.files.put(user, name, mime, data)
            files.append(ref)
            attachments.append(
                Attachment(
                    kind=kind_of(mime), file_id=ref.id, name=name, size=len(data), mime_type=mime
                )
            )
        mine = ChatMessage(
            id=new_id(), role="user", text=text, markdown=False, files=files, ts=time.time()
        )
        await self._adapter.record(user, conversation, mine)
        nonce = fields.get("nonce", "") or uuid.uuid4().hex
        inbound = Inbound(
            event_id=f"web:{user}:{nonce[:64]}",
            chat=chat_of(user, conversation),
            sender=person(user),
            text=text,
            message_id=mine.id,
            mentioned=True,
            attachments=tuple(attachments),
            session=str(SessionKey("web", user, conversation)),
        )
        submission = await self._ctx.submit(inbound)
        status = getattr(submission, "status", "")
        return _json({"conversation": conversation, "message": mine.id, "status": str(status)})

    async def _read_form(
        self, request: web.Request
    ) -> tuple[dict[str, str], list[tuple[str, str, bytes]]]:
        """The form's text fields and files, refusing more than the upload limit as it reads."""
        fields: dict[str, str] = {}
        uploads: list[tuple[str, str, bytes]] = []
        total = 0
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if not isinstance(part, BodyPartReader):
                continue
            if part.filename is None:
                if part.name in ("text", "conversation", "nonce"):
                    fields[part.name] = await _text_field(part)
                continue
            if len(uploads) >= MAX_FILES:
                raise web.HTTPRequestEntityTooLarge(
                    max_size=MAX_FILES,
                    actual_size=MAX_FILES + 1,
                    text=f"At most {MAX_FILES} files.",
                )
            data = bytearray()
            while chunk := await part.read_chunk(64 * 1024):
                total += len(chunk)
                if total > self._max_upload:
                    raise web.HTTPRequestEntityTooLarge(
                        max_size=self._max_upload,
                        actual_size=total,
                        text=f"Files may have {self._max_upload / 1_000_000:g} MB in all.",
                    )
                data.extend(chunk)
            if data:
                raw = bytes(data)
                mime = sniff(raw)  # the browser's claim is not trusted
                uploads.append((safe_name(part.filename, mime), mime, raw))
        return fields, uploads

    async def _press(self, request: web.Request) -> web.StreamResponse:
        user = await self._checked(request)
        try:
            body = await request.json()
            conversation = str(body["conversation"])
            message_id = str(body["message"])
            data = str(body["data"])
        except (ValueError, KeyError, TypeError):
            return _json({"error": "expected conversation, message and data"}, 400)
        chat = chat_of(user, conversation or NOTICES)
        message = await self._adapter.messages.get(chat.address, message_id)
        if message is None or not any(b.data == data for row in message.buttons for b in row):
            return _json({"toast": "This button is no longer there.", "alert": True})
        ref = SentRef(chat=chat, message_id=message_id)
        press = ButtonPress(
            event_id=f"web-press-{uuid.uuid4().hex}",
            chat=chat,
            user=person(user),
            data=data,
            message=ref,
        )
        reply = await self._ctx.press(press)
        if reply.edit_text is not None:
            changed = message.model_copy(
                update={"text": reply.edit_text, "buttons": [], "edited": time.time()}
            )
            await self._adapter.record(user, conversation or NOTICES, changed)
        return _json({"toast": reply.toast, "alert": reply.alert})

    async def _file(self, request: web.Request) -> web.StreamResponse:
        session = await self._signed_in(request)
        if session is None:
            raise web.HTTPUnauthorized(headers=SECURITY_HEADERS)
        stored = await self._adapter.files.get(request.match_info["id"])
        if stored is None or stored.owner != session.name:
            raise web.HTTPNotFound(headers=SECURITY_HEADERS)
        inline = stored.ref.mime_type in WEB_IMAGES
        disposition = "inline" if inline else "attachment"
        safe_name = stored.ref.name.replace('"', "").replace("\\", "")
        headers = {
            **SECURITY_HEADERS,
            "Content-Disposition": f'{disposition}; filename="{safe_name}"',
            "Cache-Control": "private, max-age=3600",
            "Content-Security-Policy": "sandbox; default-src 'none'",
        }
        kind = stored.ref.mime_type if inline else "application/octet-stream"
        return web.Response(body=stored.data, content_type=kind, headers=headers)


async def _text_field(part: BodyPartReader) -> str:
    """A form field's text, refused past MAX_TEXT_BYTES (the text limit itself is checked
    with a clear answer in the chat, by the gateway's admission)."""
    data = bytearray()
    while chunk := await part.read_chunk(64 * 1024):
        data.extend(chunk)
        if len(data) > MAX_TEXT_BYTES:
            raise web.HTTPRequestEntityTooLarge(
                max_size=MAX_TEXT_BYTES, actual_size=len(data), text="The message is too long."
            )
    return bytes(data).decode("utf-8", "replace")


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _json(data: dict[str, Any], status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(data),
        status=status,
        content_type="application/json",
        headers=SECURITY_HEADERS,
    )
