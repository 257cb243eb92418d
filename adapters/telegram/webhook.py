"""The `/telegram/webhook` route on the gateway's own HTTP server.

Telegram sends the secret given to `setWebhook` in a header on every call; a request
without it (or with another) gets 403 and is not read further. A body that is not a JSON
object with an integer `update_id`, or whose fields the gateway reads have the wrong shape,
gets 400. An accepted update is written to the store as it came (received.py) and the call
answered 200; python-telegram-bot reads it, and admission takes it, after the answer. When
the store is unreachable the answer is 503 and Telegram sends the update again later.
"""

from __future__ import annotations

import hmac
import logging
import time
from typing import Any

from aiohttp import web

from adapters.telegram.received import RawUpdate, ReceivedUpdates, lane_of
from adapters.telegram.update_check import shape_problem
from gateway.sdk import Handler, StoreUnavailable, parse_json

log = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def webhook_handler(secret: str, received: ReceivedUpdates) -> Handler:
    expected = secret.encode()

    async def handle(request: web.Request) -> web.StreamResponse:
        given = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(given, expected):
            log.warning("telegram webhook call with a wrong or missing secret refused")
            return web.Response(status=403)
        update = raw_update(await request.read())
        if update is None:
            return web.Response(status=400, text="not a Telegram update")
        if received.full():
            return web.Response(status=503, text="too many updates waiting; send it again")
        try:
            await received.write(update)
        except StoreUnavailable as exc:
            log.error("telegram update not stored update=%d error=%s", update.update_id, exc)
            return web.Response(status=503, text="storage unavailable; send it again")
        # Answered before the update is read: the answer goes out even if this process
        # stops right after, and the stored update is read by whoever comes next.
        response = web.Response(status=200)
        try:
            await response.prepare(request)
            await response.write_eof()
        finally:
            received.hand_over(update)
        return response

    return handle


def raw_update(body: bytes) -> RawUpdate | None:
    """The update in a webhook body, or None when the body is not one (not UTF-8 JSON, not
    an object with an integer `update_id`, or fields of the wrong shape): only such a body is
    refused, so nothing malformed is stored. python-telegram-bot builds nothing here."""
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
    # parse_json took it as UTF-8 already.
    return RawUpdate(update_id, lane_of(data, update_id), body.decode(), time.time())
