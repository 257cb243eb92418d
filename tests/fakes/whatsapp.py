"""A fake WhatsApp Cloud API for tests (aiohttp on 127.0.0.1): the Graph API endpoints the
adapter calls, and a sender of signed webhook notifications as Meta sends them.

    async with FakeWhatsApp() as wa:
        settings = ... whatsapp={**wa.settings(), ...}
        await wa.customer_sends(webhook_url, wa.text("hello"))
        [reply] = await wa.wait_sent()

The Graph side checks what Meta checks: the bearer token (error 190), the body of every
message type and WhatsApp's limits (three reply buttons of at most 20 characters, ten list
rows of 24, 4096 characters of text, 1024 of an interactive body or a caption), uploaded
media ids, approved templates and their parameters (132000, 132018), and the 24-hour
customer-service window: a free-form message to a number that has not written for 24 hours
fails with error 131047. The Cloud API accepts such a message and reports the failure in a
`failed` status notification; that is what the fake does when `webhook_url` is set (it POSTs
the signed status there), and it refuses the request itself with the same error otherwise
(`window_refusal = "request"`). `fail()` scripts further errors.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.fakes.server import LocalServer

PHONE_NUMBER_ID = "106540352242922"
DISPLAY_NUMBER = "+1 555-010-0199"
BUSINESS_NUMBER = "15550100199"
WABA_ID = "102290129340398"
TOKEN = "EAAtest-whatsapp-token"
APP_SECRET = "test-app-secret"
VERIFY_TOKEN = "test-verify-token"
VERSION = "v23.0"
WINDOW = 24 * 3600

_REENGAGEMENT = (
    "Message failed to send because more than 24 hours have passed since the customer last "
    "replied to this number."
)
_TEMPLATE_PARAM = re.compile(r"[\n\t]| {5,}")
_FREE_FORM = {"text", "image", "audio", "video", "document", "sticker", "interactive"}


@dataclass
class Sent:
    """A message the bot sent: the request body and the id WhatsApp gave it."""

    body: dict[str, Any]
    message_id: str
    at: float = field(default_factory=time.monotonic)

    @property
    def to(self) -> str:
        return str(self.body.get("to", ""))

    @property
    def type(self) -> str:
        return str(self.body.get("type", ""))

    @property
    def text(self) -> str:
        """The text a person reads: a body, a caption, an interactive body or the filled
        template."""
        part = self.body.get(self.type) or {}
        if self.type == "text":
            return str(part.get("body", ""))
        if self.type == "interactive":
            return str(part["body"]["text"])
        if self.type == "template":
            params = part.get("components", [{}])[0].get("parameters", [])
            return " ".join(p.get("text", "") for p in params)
        return str(part.get("caption", ""))

    @property
    def quoted(self) -> str | None:
        return (self.body.get("context") or {}).get("message_id")

    def button_ids(self) -> dict[str, str]:
        """Title -> id of the reply buttons or list rows of an interactive message."""
        interactive = self.body.get("interactive") or {}
        action = interactive.get("action") or {}
        found = {b["reply"]["title"]: b["reply"]["id"] for b in action.get("buttons", [])}
        for section in action.get("sections", []):
            found.update({row["title"]: row["id"] for row in section["rows"]})
        return found


@dataclass
class Media:
    id: str
    data: bytes
    mime_type: str
    filename: str = ""
    uploaded: bool = False  # by the bot (else a person sent it)


@dataclass
class _Failure:
    code: int
    message: str
    status: int
    headers: dict[str, str]


class GraphRefusal(Exception):
    def __init__(self, code: int, message: str, status: int = 400, details: str = "") -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.details = code, message, status, details


@dataclass
class FakeWhatsApp(LocalServer):
    # Approved templates: name -> (language, number of body parameters).
    templates: dict[str, tuple[str, int]] = field(default_factory=dict)
    # Where notifications about the bot's messages go (the gateway's webhook), once known.
    webhook_url: str = ""
    window_refusal: str = "status"  # "status": accepted, then a failed status; "request"

    def __post_init__(self) -> None:
        super().__init__()
        self.sent: list[Sent] = []
        self.receipts: list[dict[str, Any]] = []  # read receipts / typing indicators
        self.requests: list[tuple[str, str]] = []  # (method, path) of every Graph call
        self.media: dict[str, Media] = {}
        self.downloads: list[str] = []  # media ids whose bytes were served
        self.last_inbound: dict[str, float] = {}  # number -> when it last wrote
        self.inbound_ids: set[str] = set()
        self._failures: dict[str, deque[_Failure]] = {}
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()
        self.window_failures: list[Sent] = []  # accepted, then failed with 131047
        self._reports: set[asyncio.Task[None]] = set()

    # -- addresses and settings -------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self) -> dict[str, Any]:
        return {
            "phone_number_id": PHONE_NUMBER_ID,
            "access_token": TOKEN,
            "app_secret": APP_SECRET,
            "verify_token": VERIFY_TOKEN,
            "api_version": VERSION,
            "api_url": self.api_url,
        }

    # -- scripting ---------------------------------------------------------------------------

    def fail(
        self,
        kind: str,
        code: int,
        message: str,
        *,
        status: int = 400,
        headers: dict[str, str] | None = None,
    ) -> None:
        """The next request of `kind` ("messages", "media", "phone" or "media_info") answers
        with this Graph error."""
        failure = _Failure(code, message, status, headers or {})
        self._failures.setdefault(kind, deque()).append(failure)

    def close_window(self, number: str) -> None:
        """As if `number` last wrote more than 24 hours ago."""
        self.last_inbound[number] = time.time() - WINDOW - 60

    def add_media(self, data: bytes, mime_type: str, filename: str = "") -> str:
        """A file a person sends: its id goes in the webhook, its bytes are served."""
        media_id = str(next(self._ids) + 900_000_000_000_000)
        self.media[media_id] = Media(media_id, data, mime_type, filename)
        return media_id

    def uploads(self) -> list[Media]:
        return [m for m in self.media.values() if m.uploaded]

    async def wait_sent(self, count: int = 1, seconds: float = 8) -> list[Sent]:
        await self._until(lambda: len(self.sent) >= count, seconds)
        return list(self.sent)

    async def wait_text(self, text: str, seconds: float = 8) -> Sent:
        def found() -> list[Sent]:
            return [s for s in self.sent if s.text == text]

        await self._until(lambda: bool(found()), seconds)
        return found()[0]

    async def wait_text_starting(self, prefix: str, seconds: float = 8) -> Sent:
        def found() -> list[Sent]:
            return [s for s in self.sent if s.text.startswith(prefix)]

        await self._until(lambda: bool(found()), seconds)
        return found()[0]

    async def wait_type(self, kind: str, seconds: float = 8) -> Sent:
        def found() -> list[Sent]:
            return [s for s in self.sent if s.type == kind]

        await self._until(lambda: bool(found()), seconds)
        return found()[0]

    async def wait_buttons(self, seconds: float = 8) -> Sent:
        def found() -> list[Sent]:
            return [s for s in self.sent if s.type == "interactive"]

        await self._until(lambda: bool(found()), seconds)
        return found()[0]

    async def wait_receipts(self, count: int = 1, seconds: float = 8) -> list[dict[str, Any]]:
        await self._until(lambda: len(self.receipts) >= count, seconds)
        return list(self.receipts)

    async def _until(self, done: Any, seconds: float) -> None:
        async with asyncio.timeout(seconds), self._changed:
            await self._changed.wait_for(done)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- webhook notifications (what Meta POSTs to the gateway) ------------------------------

    def new_message_id(self) -> str:
        return f"wamid.{uuid.uuid4().hex.upper()}"

    def message(self, number: str, kind: str, part: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {
            "from": number,
            "id": extra.pop("id", None) or self.new_message_id(),
            "timestamp": str(int(time.time())),
            "type": kind,
            kind: part,
            **extra,
        }

    def text(self, body: str, *, number: str = "15551230001", **extra: Any) -> dict[str, Any]:
        return self.message(number, "text", {"body": body}, **extra)

    def button_press(self, sent: Sent, title: str, *, number: str) -> dict[str, Any]:
        """`number` taps the reply button (or list row) titled `title` of message `sent`."""
        button_id = sent.button_ids()[title]
        is_list = sent.body["interactive"]["type"] == "list"
        reply = {"id": button_id, "title": title}
        interactive = (
            {"type": "list_reply", "list_reply": reply}
            if is_list
            else {"type": "button_reply", "button_reply": reply}
        )
        context = {"from": BUSINESS_NUMBER, "id": sent.message_id}
        return self.message(number, "interactive", interactive, context=context)

    def notification(
        self,
        messages: list[dict[str, Any]] = (),  # type: ignore[assignment]
        statuses: list[dict[str, Any]] = (),  # type: ignore[assignment]
        names: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        value: dict[str, Any] = {
            "messaging_product": "whatsapp",
            "metadata": {
                "display_phone_number": BUSINESS_NUMBER,
                "phone_number_id": PHONE_NUMBER_ID,
            },
        }
        if messages:
            senders = {m["from"] for m in messages}
            value["contacts"] = [
                {"profile": {"name": (names or {}).get(n, f"Person {n[-4:]}")}, "wa_id": n}
                for n in sorted(senders)
            ]
            value["messages"] = list(messages)
        if statuses:
            value["statuses"] = list(statuses)
        return {
            "object": "whatsapp_business_account",
            "entry": [{"id": WABA_ID, "changes": [{"value": value, "field": "messages"}]}],
        }

    def status(
        self, sent: Sent, status: str, errors: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "id": sent.message_id,
            "status": status,
            "timestamp": str(int(time.time())),
            "recipient_id": sent.to,
        }
        if errors:
            entry["errors"] = errors
        return entry

    async def customer_sends(
        self, url: str, *messages: dict[str, Any], names: dict[str, str] | None = None
    ) -> int:
        """People write: their windows open, and Meta POSTs the signed notification."""
        for message in messages:
            self.last_inbound[message["from"]] = float(message["timestamp"])
            self.inbound_ids.add(message["id"])
        body = json.dumps(self.notification(list(messages), names=names))
        return (await post_webhook(url, body.encode())).status

    async def report_statuses(self, url: str, *statuses: dict[str, Any]) -> int:
        body = json.dumps(self.notification(statuses=list(statuses)))
        return (await post_webhook(url, body.encode())).status

    # -- the Graph API ------------------------------------------------------------------------

    def routes(self, app: web.Application) -> None:
        app.router.add_get(f"/{VERSION}/{PHONE_NUMBER_ID}", self._phone)
        app.router.add_post(f"/{VERSION}/{PHONE_NUMBER_ID}/messages", self._messages)
        app.router.add_post(f"/{VERSION}/{PHONE_NUMBER_ID}/media", self._upload)
        app.router.add_get(f"/{VERSION}/{{media_id:[0-9]+}}", self._media_info)
        app.router.add_get("/whatsapp_business/attachments/", self._download)

    async def _phone(self, request: web.Request) -> web.Response:
        return await self._answer(request, "phone", self._phone_info)

    async def _messages(self, request: web.Request) -> web.Response:
        return await self._answer(request, "messages", self._message)

    async def _upload(self, request: web.Request) -> web.Response:
        return await self._answer(request, "media", self._store_upload)

    async def _media_info(self, request: web.Request) -> web.Response:
        return await self._answer(request, "media_info", self._describe_media)

    async def _answer(self, request: web.Request, kind: str, handle: Any) -> web.Response:
        self.requests.append((request.method, request.path))
        try:
            if request.headers.get("Authorization") != f"Bearer {TOKEN}":
                raise GraphRefusal(
                    190, "Invalid OAuth access token - Cannot parse access token", 401
                )
            queued = self._failures.get(kind)
            if queued:
                failure = queued.popleft()
                return _graph_error(
                    GraphRefusal(failure.code, failure.message, failure.status), failure.headers
                )
            result = await handle(request)
        except GraphRefusal as refusal:
            return _graph_error(refusal)
        finally:
            await self._notify()
        return web.json_response(result)

    async def _phone_info(self, request: web.Request) -> dict[str, Any]:
        return {
            "display_phone_number": DISPLAY_NUMBER,
            "verified_name": "Chatgate Test",
            "id": PHONE_NUMBER_ID,
        }

    async def _message(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except ValueError:
            raise GraphRefusal(100, "Invalid parameter", details="body is not JSON") from None
        if not isinstance(body, dict) or body.get("messaging_product") != "whatsapp":
            raise GraphRefusal(100, "Invalid parameter", details="messaging_product is required")
        if body.get("status") == "read":
            if body.get("message_id") not in self.inbound_ids:
                raise GraphRefusal(100, "Invalid parameter", details="unknown message_id")
            typing = body.get("typing_indicator")
            if typing is not None and typing != {"type": "text"}:
                raise GraphRefusal(100, "Invalid parameter", details="typing_indicator.type")
            self.receipts.append(body)
            return {"success": True}
        to, kind = body.get("to"), body.get("type")
        if not isinstance(to, str) or not to.isdigit():
            raise GraphRefusal(100, "Invalid parameter", details="to must be a phone number")
        if kind not in body or not isinstance(body[kind], dict):
            raise GraphRefusal(100, "Invalid parameter", details=f"{kind} object missing")
        context = body.get("context")
        if context is not None and not isinstance(context.get("message_id"), str):
            raise GraphRefusal(100, "Invalid parameter", details="context.message_id")
        last = self.last_inbound.get(to)
        closed = last is None or time.time() - last > WINDOW
        outside = (kind in _FREE_FORM or kind == "reaction") and closed
        if outside and not (self.window_refusal == "status" and self.webhook_url):
            raise GraphRefusal(131047, "Re-engagement message", details=_REENGAGEMENT)
        _check_message(str(kind), body[kind], self.media, self.templates)
        message_id = self.new_message_id()
        if outside:
            failed = Sent(body, message_id)
            self.window_failures.append(failed)
            task = asyncio.create_task(self._report_window_failure(failed))
            self._reports.add(task)
            task.add_done_callback(self._reports.discard)
        else:
            self.sent.append(Sent(body, message_id))
        return {
            "messaging_product": "whatsapp",
            "contacts": [{"input": to, "wa_id": to}],
            "messages": [{"id": message_id}],
        }

    async def _report_window_failure(self, failed: Sent) -> None:
        """As WhatsApp does: the send was accepted; its failure comes as a status."""
        await asyncio.sleep(0.05)  # after the response to the send
        error = {"code": 131047, "title": "Re-engagement message", "message": _REENGAGEMENT}
        await self.report_statuses(self.webhook_url, self.status(failed, "failed", [error]))

    async def before_stop(self) -> None:
        for task in list(self._reports):
            task.cancel()
        await asyncio.gather(*self._reports, return_exceptions=True)

    async def _store_upload(self, request: web.Request) -> dict[str, Any]:
        form = await request.post()
        file = form.get("file")
        if form.get("messaging_product") != "whatsapp" or not isinstance(file, web.FileField):
            raise GraphRefusal(100, "Invalid parameter", details="messaging_product and file")
        mime = str(form.get("type") or "")
        if mime != file.content_type:
            raise GraphRefusal(100, "Invalid parameter", details="type does not match the file")
        media_id = str(next(self._ids) + 800_000_000_000_000)
        data = file.file.read()
        self.media[media_id] = Media(media_id, data, mime, file.filename, uploaded=True)
        return {"id": media_id}

    async def _describe_media(self, request: web.Request) -> dict[str, Any]:
        media = self.media.get(request.match_info["media_id"])
        if media is None:
            raise GraphRefusal(100, "Unsupported get request", details="media not found")
        return {
            "messaging_product": "whatsapp",
            "url": f"{self.api_url}/whatsapp_business/attachments/?mid={media.id}&ext=1",
            "mime_type": media.mime_type,
            "sha256": hashlib.sha256(media.data).hexdigest(),
            "file_size": len(media.data),
            "id": media.id,
        }

    async def _download(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.Response(status=401)
        media = self.media.get(request.query.get("mid", ""))
        if media is None:
            return web.Response(status=404)
        self.downloads.append(media.id)
        return web.Response(body=media.data, content_type=media.mime_type.split(";")[0])


def _check_message(
    kind: str,
    part: dict[str, Any],
    media: dict[str, Media],
    templates: dict[str, tuple[str, int]],
) -> None:
    """WhatsApp's rules for each message type (the ones the adapter may break)."""

    def invalid(details: str) -> GraphRefusal:
        return GraphRefusal(100, "Invalid parameter", details=details)

    if kind == "text":
        text = part.get("body")
        if not isinstance(text, str) or not text.strip() or len(text) > 4096:
            raise invalid("text.body must be 1-4096 characters")
    elif kind in ("image", "audio", "video", "document", "sticker"):
        found = media.get(str(part.get("id")))
        if found is None or not found.uploaded:
            raise GraphRefusal(131053, "Media upload error", details="unknown media id")
        if kind == "audio" and "caption" in part:
            raise invalid("audio messages take no caption")
        if len(str(part.get("caption", ""))) > 1024:
            raise invalid("caption longer than 1024 characters")
    elif kind == "interactive":
        _check_interactive(part, invalid)
    elif kind == "template":
        name, language = part.get("name"), (part.get("language") or {}).get("code")
        if name not in templates or templates[name][0] != language:
            raise GraphRefusal(132001, "Template name does not exist in the translation")
        params = [
            p
            for c in part.get("components", [])
            if c.get("type") == "body"
            for p in c.get("parameters", [])
        ]
        if len(params) != templates[name][1]:
            raise GraphRefusal(132000, "Number of parameters does not match the expected number")
        for param in params:
            if _TEMPLATE_PARAM.search(str(param.get("text", ""))):
                raise GraphRefusal(
                    132018,
                    "There was an issue with the parameters in your template.",
                    details="Param text cannot have new-line/tab characters or more than 4 "
                    "consecutive spaces",
                )
    elif kind == "reaction":
        if not isinstance(part.get("message_id"), str):
            raise invalid("reaction.message_id")
    else:
        raise invalid(f"unsupported message type {kind}")


def _check_interactive(part: dict[str, Any], invalid: Any) -> None:
    body = (part.get("body") or {}).get("text")
    if not isinstance(body, str) or not body.strip() or len(body) > 1024:
        raise invalid("interactive.body.text must be 1-1024 characters")
    action = part.get("action") or {}
    if part.get("type") == "button":
        buttons = action.get("buttons") or []
        if not 1 <= len(buttons) <= 3:
            raise invalid("an interactive button message has 1 to 3 buttons")
        titles = [b.get("reply", {}).get("title", "") for b in buttons]
        ids = [b.get("reply", {}).get("id", "") for b in buttons]
        if any(not t or len(t) > 20 for t in titles) or len(set(titles)) != len(titles):
            raise invalid("button titles must be unique and 1-20 characters")
        if any(not i or len(i) > 256 for i in ids) or len(set(ids)) != len(ids):
            raise invalid("button ids must be unique and 1-256 characters")
    elif part.get("type") == "list":
        label = action.get("button")
        if not isinstance(label, str) or not 1 <= len(label) <= 20:
            raise invalid("the list's button text must be 1-20 characters")
        rows = [row for section in action.get("sections", []) for row in section.get("rows", [])]
        if not 1 <= len(rows) <= 10:
            raise invalid("a list has 1 to 10 rows")
        for row in rows:
            if not 1 <= len(row.get("title", "")) <= 24 or len(row.get("description", "")) > 72:
                raise invalid("row titles are 1-24 characters, descriptions up to 72")
            if not 1 <= len(row.get("id", "")) <= 200:
                raise invalid("row ids are 1-200 characters")
    else:
        raise invalid("interactive.type must be button or list")


def _graph_error(refusal: GraphRefusal, headers: dict[str, str] | None = None) -> web.Response:
    error: dict[str, Any] = {
        "message": f"(#{refusal.code}) {refusal.message}",
        "type": "OAuthException",
        "code": refusal.code,
        "fbtrace_id": uuid.uuid4().hex[:22],
    }
    if refusal.details:
        error["error_data"] = {"messaging_product": "whatsapp", "details": refusal.details}
    return web.json_response({"error": error}, status=refusal.status, headers=headers)


# -- signed webhook requests --------------------------------------------------------------------


def signature(body: bytes, secret: str = APP_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass
class Delivery:
    status: int
    text: str


async def post_webhook(
    url: str, body: bytes, *, secret: str = APP_SECRET, headers: dict[str, str] | None = None
) -> Delivery:
    """POST a notification as Meta does: JSON, signed with the app secret; `headers` add to
    or replace the signature (an empty value drops it)."""
    sent = {"Content-Type": "application/json", "X-Hub-Signature-256": signature(body, secret)}
    sent.update(headers or {})
    sent = {name: value for name, value in sent.items() if value}
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=sent) as r:
        return Delivery(r.status, await r.text())


async def verify_webhook(url: str, **query: str) -> Delivery:
    async with aiohttp.ClientSession() as session, session.get(url, params=query) as r:
        return Delivery(r.status, await r.text())
