"""The webhook on the gateway's HTTP server (`/whatsapp/webhook` by default).

GET is Meta's verification handshake. A POST is checked in this order, and nothing is
parsed before its signature verifies: X-Hub-Signature-256 (401), the body's shape (400),
then every message is stored through the core before the 200, so any replica may take any
POST and one that dies before answering leaves the notification for Meta to send again
(a repeat is dropped by the store's dedupe on the message id). A store outage answers 503.
Button presses and statuses are handled after the messages are stored.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from adapters.whatsapp.normalize import WebhookContent, read_webhook
from adapters.whatsapp.request_check import SIGNATURE_HEADER, parse_body, signed
from gateway.sdk import HttpServer

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024  # notifications are a few kilobytes; media travels by id


class Unstored(Exception):
    """The store could not take a message: the POST is refused so Meta sends it again."""


class WebhookEndpoint:
    def __init__(
        self,
        *,
        app_secret: str,
        verify_token: str,
        phone_number_id: str,
        take: Callable[[WebhookContent], Awaitable[None]],
    ) -> None:
        self._secret = app_secret.encode()
        self._verify_token = verify_token.encode()
        self._phone = phone_number_id
        self._take = take

    def mount(self, http: HttpServer, path: str) -> None:
        http.add_route("GET", path, self.verify)
        http.add_route("POST", path, self.receive)

    async def verify(self, request: web.Request) -> web.Response:
        """Meta's subscription check: echo hub.challenge when hub.verify_token matches."""
        query = request.query
        token = query.get("hub.verify_token", "").encode("utf-8", "replace")
        challenge = query.get("hub.challenge", "")
        if query.get("hub.mode") != "subscribe" or not challenge:
            return _refuse(400, "not a subscription request")
        if not self._verify_token or not hmac.compare_digest(token, self._verify_token):
            return _refuse(403, "verify token does not match")
        log.info("whatsapp webhook verified")
        return web.Response(text=challenge, content_type="text/plain")

    async def receive(self, request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > MAX_BODY:
            return _refuse(413, "body too large")
        try:
            raw = await request.read()  # the server's own size limit applies while reading
        except web.HTTPRequestEntityTooLarge:
            return _refuse(413, "body too large")
        except (ConnectionError, ValueError):
            return _refuse(400, "body could not be read")
        if len(raw) > MAX_BODY:
            return _refuse(413, "body too large")
        if not signed(self._secret, raw, request.headers.get(SIGNATURE_HEADER, "")):
            return _refuse(401, "missing or wrong X-Hub-Signature-256")
        body, problem = parse_body(raw)
        if body is None:
            return _refuse(400, problem)
        content = read_webhook(body, self._phone)
        try:
            await self._take(content)
        except Unstored as exc:
            log.warning("whatsapp notification not stored; Meta will send it again: %s", exc)
            return web.json_response({"error": "try again"}, status=503)
        return web.json_response({"ok": True})


def _refuse(status: int, why: str) -> web.Response:
    log.warning("whatsapp webhook request refused status=%d reason=%r", status, why)
    return web.json_response({"error": why}, status=status)
