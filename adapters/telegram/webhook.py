"""The `/telegram/webhook` route on the gateway's own HTTP server.

Telegram sends the secret given to `setWebhook` in a header on every call; a request
without it (or with another) gets 403 and is not read further. An accepted update is
taken (stored) before the call is answered 200; when the store is unreachable the answer
is 503 and Telegram sends the update again later.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from telegram import Bot, Update

from adapters.telegram.intake import parse_update
from gateway.http import Handler

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def webhook_handler(secret: str, bot: Bot, take: Callable[[Update], Awaitable[bool]]) -> Handler:
    expected = secret.encode()

    async def handle(request: web.Request) -> web.Response:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, expected):
            log.warning("telegram webhook call with a wrong or missing secret refused")
            return web.Response(status=403)
        try:
            update = parse_update(json.loads(await request.read()), bot)
        except ValueError:
            update = None
        if update is None:
            return web.Response(status=400, text="not a Telegram update")
        # Storing takes one store round trip; the turn itself runs after the answer.
        if not await take(update):
            return web.Response(status=503, text="storage unavailable; send it again")
        return web.Response(status=200)

    return handle
