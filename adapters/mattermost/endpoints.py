"""The two URLs the Mattermost server calls on the gateway's HTTP server, on every replica.

`POST /mattermost/command`: a slash command. Mattermost sends its token as
`Authorization: Token <token>`; anything else is refused with 401 before the body is read.
`POST /mattermost/actions/{tag}`: a press on one of the bot's buttons. A wrong tag is refused
with 401 before the body is read; then the press's `context` must carry a secret that
verifies (buttons.py), else 401 (none) or 403 (wrong); only then is anything in the request
used. Bodies that are not what Mattermost sends get a 4xx, never a 500.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web

from adapters.mattermost.access import MattermostAccess
from adapters.mattermost.buttons import ACTIONS_PATH, ActionSigner
from adapters.mattermost.normalize import SlashCommand, action_press, command_inbound
from gateway.sdk import AdapterContext, ButtonPress, ChatKind, PressReply, Status, parse_json

log = logging.getLogger(__name__)

COMMAND_PATH = "/mattermost/command"
MAX_ACTION_BODY = 64 * 1024  # a press is a few hundred bytes
ANSWER_WITHIN = 10.0  # Mattermost waits 30 s for an integration; past this, answer by REST
WORKING = "Working on it…"
STORE_DOWN = "I could not take that right now (my storage is unreachable); please try again."
FAILED = PressReply(toast="That did not work; please try again.", alert=True)

Spawn = Callable[[Coroutine[Any, Any, None]], None]
AfterPress = Callable[[ButtonPress, PressReply], Awaitable[None]]


@dataclass(frozen=True)
class MattermostEndpoints:
    ctx: AdapterContext
    access: MattermostAccess
    signer: ActionSigner
    command_token: str  # empty: no slash command endpoint
    channel_kind: Callable[[str], Awaitable[ChatKind]]
    after_press: AfterPress  # shows a reply that came too late for the HTTP answer
    spawn: Spawn

    def mount(self) -> None:
        http = self.ctx.http
        if http is None:
            return
        http.add_route("POST", ACTIONS_PATH + "/{tag}", self.on_action)
        if self.command_token:
            http.add_route("POST", COMMAND_PATH, self.on_command)

    # -- slash commands ------------------------------------------------------------------

    async def on_command(self, request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "")
        expected = f"Token {self.command_token}"
        if not hmac.compare_digest(given.encode(), expected.encode()):
            return _refuse(401, "invalid token", "slash command without the right token")
        if request.content_type != "application/x-www-form-urlencoded":
            return _refuse(415, "unsupported media type", f"content type {request.content_type}")
        try:
            raw = (await request.read()).decode("utf-8")
            command = SlashCommand.parse(dict(parse_qsl(raw, max_num_fields=100)))
        except ValueError as exc:  # not UTF-8, too many fields, a field missing
            return _refuse(400, "malformed body", str(exc))
        kind = await self.channel_kind(command.channel_id)
        names = {name for name, _ in self.ctx.commands()}
        inbound = command_inbound(command, kind, names)
        if not inbound.text:
            return _ephemeral("Usage: /<command> <your request>")
        refusal = self.access.reason(inbound.chat, inbound.sender)
        if refusal is not None:
            return _ephemeral(refusal)  # private to the person, not a post in the channel
        submitted = await self.ctx.submit(inbound)
        if submitted.status is Status.UNAVAILABLE:
            # Mattermost does not send a slash command again: say so to the person.
            return _ephemeral(STORE_DOWN)
        if submitted.status in (Status.STARTED, Status.QUEUED):
            return _ephemeral(WORKING)
        return web.json_response({})

    # -- button presses ------------------------------------------------------------------

    async def on_action(self, request: web.Request) -> web.Response:
        tag = request.match_info.get("tag", "")
        if not hmac.compare_digest(tag.encode(), self.signer.url_tag().encode()):
            return _refuse(401, "invalid request", "press to a URL no button has")
        if (request.content_length or 0) > MAX_ACTION_BODY:
            return _refuse(413, "too large", "action body over the limit")
        if request.content_type != "application/json":
            return _refuse(415, "unsupported media type", f"content type {request.content_type}")
        try:
            body = parse_json(await request.read())  # the server caps bodies at 2 MB
        except ValueError as exc:
            return _refuse(400, "malformed body", str(exc))
        if not isinstance(body, dict) or not isinstance(body.get("context"), dict):
            return _refuse(401, "invalid request", "press without a context")
        if "secret" not in body["context"]:
            return _refuse(401, "invalid request", "press without a secret")
        channel_id = body.get("channel_id")
        channel_id = channel_id if isinstance(channel_id, str) else ""
        signed = self.signer.verify(body["context"], channel_id)
        if signed is None:
            return _refuse(403, "forbidden", "press whose secret does not verify")
        if not isinstance(body.get("user_id"), str) or not body["user_id"]:
            return _refuse(400, "malformed body", "press without a user_id")
        trigger = body.get("trigger_id")
        event_id = f"mm:a:{trigger if isinstance(trigger, str) and trigger else uuid.uuid4().hex}"
        press = action_press(body, signed.data, signed.chat, event_id)
        refusal = self.access.reason(press.chat, press.user)
        if refusal is not None:
            return web.json_response({"ephemeral_text": refusal})
        task = asyncio.ensure_future(self._decide(press))
        done, _ = await asyncio.wait({task}, timeout=ANSWER_WITHIN)
        if not done:
            self.spawn(self._answer_later(task, press))
            return web.json_response({})
        return web.json_response(action_response(task.result()))

    async def _decide(self, press: ButtonPress) -> PressReply:
        try:
            return await self.ctx.press(press)
        except Exception:
            log.exception("button press handler failed data=%s", press.data)
            return FAILED

    async def _answer_later(self, task: asyncio.Future[PressReply], press: ButtonPress) -> None:
        await self.after_press(press, await task)


def action_response(reply: PressReply) -> dict[str, Any]:
    """The answer to an action request: a refusal or notice is shown to the presser alone;
    an outcome replaces the post's text and removes its buttons."""
    if reply.alert or reply.edit_text is None:
        return {"ephemeral_text": reply.toast} if reply.toast else {}
    return {"update": {"message": reply.edit_text, "props": {}}}


def _ephemeral(text: str) -> web.Response:
    return web.json_response({"response_type": "ephemeral", "text": text})


def _refuse(status: int, error: str, why: str) -> web.Response:
    log.warning("mattermost request refused status=%d reason=%r", status, why)
    return web.json_response({"error": error}, status=status)
