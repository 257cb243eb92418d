"""The Events API endpoint on the gateway's HTTP server (`POST /slack/events`).

Bolt does the work: it checks the signature (missing, wrong or older than five minutes:
401, nothing runs), answers `url_verification`, and acks events before their listeners
run. This module only refuses what Bolt cannot take (request_check.py) and converts
between aiohttp and bolt requests.
"""

from __future__ import annotations

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier

from adapters.slack.request_check import refusal
from gateway.sdk import HttpServer

EVENTS_PATH = "/slack/events"


class EventsEndpoint:
    def __init__(self, app: AsyncApp, signing_secret: str) -> None:
        self._app = app
        self._verifier = SignatureVerifier(signing_secret)

    def mount(self, http: HttpServer, path: str = EVENTS_PATH) -> None:
        http.add_route("POST", path, self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        refused = refusal(
            self._verifier, request.headers, request.content_type, await request.read()
        )
        if refused is not None:
            return refused
        bolt_request = await to_bolt_request(request)
        bolt_response = await self._app.async_dispatch(bolt_request)
        return await to_aiohttp_response(bolt_response)
