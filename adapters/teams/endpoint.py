"""The messaging endpoint on the gateway's HTTP server (`POST /teams/messages` by default).

The order is the Bot Framework's: the bearer token is verified before the body is read
(missing or forged: 401), then the body must be a JSON activity (else 400/415), then the
token must cover that activity (its serviceUrl and channel: else 403). Only then does the
adapter see it; its answer is what Teams receives, after the message is stored.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web
from microsoft_agents.activity import Activity
from pydantic import ValidationError

from adapters.teams.auth import (
    ActivityAuth,
    Forbidden,
    KeysUnavailable,
    Unauthorized,
    check_activity,
)
from gateway.sdk import HttpServer, parse_json

log = logging.getLogger(__name__)

MAX_BODY = 512 * 1024  # activities are a few KB; attachments travel by URL

ActivityHandler = Callable[[Activity], Awaitable[web.Response]]


class MessagingEndpoint:
    def __init__(self, auth: Callable[[], ActivityAuth | None], handle: ActivityHandler) -> None:
        self._auth = auth  # the running adapter's (None while it is stopped)
        self._handle = handle

    def mount(self, http: HttpServer, path: str) -> None:
        http.add_route("POST", path, self.receive)

    async def receive(self, request: web.Request) -> web.Response:
        auth = self._auth()
        if auth is None:
            return _refuse(503, "not running")
        try:
            claims = await auth.verify(request.headers.get("Authorization"))
        except Unauthorized as exc:
            log.warning("teams activity refused: %s", exc)
            return _refuse(401, "unauthorized")
        except KeysUnavailable as exc:
            log.warning("teams activity not checked: %s", exc)
            return _refuse(503, "signing keys unavailable")
        if request.content_type != "application/json":
            return _refuse(415, "expected application/json")
        if (request.content_length or 0) > MAX_BODY:
            return _refuse(413, "body too large")
        raw = await request.content.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            return _refuse(413, "body too large")
        try:
            body = parse_json(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
            activity = Activity.model_validate(body)
        except (ValueError, TypeError, ValidationError):
            # The SDK's own validators raise TypeError for some shapes (an empty channelId).
            return _refuse(400, "malformed activity")
        if not activity.type or not activity.service_url or activity.channel_id is None:
            return _refuse(400, "malformed activity")
        try:
            check_activity(
                claims, service_url=activity.service_url, channel_id=str(activity.channel_id)
            )
        except Forbidden as exc:
            log.warning("teams activity refused: %s", exc)
            return _refuse(403, "forbidden")
        return await self._handle(activity)


def _refuse(status: int, reason: str) -> web.Response:
    return web.json_response({"error": reason}, status=status)
