"""The `/telegram/webhook` route on the gateway's own HTTP server.

Telegram sends the secret given to `setWebhook` in a header on every call; a request
without it (or with another) gets 403 and is not read further. An accepted update is
taken (stored) before the call is answered 200; when the store is unreachable the answer
is 503 and Telegram sends the update again later.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from telegram import Bot, Update

from adapters.telegram.update_check import shape_problem
from gateway.sdk import Handler, parse_json

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
        update = parse_update(await request.read(), bot)
        if update is None:
            return web.Response(status=400, text="not a Telegram update")
        # Storing takes one store round trip; the turn itself runs after the answer.
        if not await take(update):
            return web.Response(status=503, text="storage unavailable; send it again")
        return web.Response(status=200)

    return handle


def parse_update(body: bytes, bot: Bot) -> Update | None:
    """The update in a webhook body, or None when the body is not one (not JSON, not an
    object with an integer `update_id`, or fields of the wrong shape): only such a body is
    refused, so nothing malformed reaches the processing path."""
    try:
        data: Any = parse_json(body)
    except ValueError:  # not UTF-8, not JSON, or nested deeper than any update
        return None
    update_id = data.get("update_id") if isinstance(data, dict) else None
    if not isinstance(update_id, int) or isinstance(update_id, bool):
        return None
    problem = shape_problem(data)
    if problem:
        log.warning("telegram webhook update refused update_id=%d reason=%r", update_id, problem)
        return None
    try:
        # python-telegram-bot trusts the shape it is given: a string where an object belongs
        # raises whatever the first attribute access on it raises.
        return Update.de_json(data, bot)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
