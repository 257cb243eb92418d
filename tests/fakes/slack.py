"""A fake Slack for tests (aiohttp on 127.0.0.1): the Web API, a Socket Mode WebSocket, and
helpers that deliver Events API requests signed the way Slack signs them.

    async with FakeSlack() as slack:
        settings = ... slack={"bot_token": "xoxb-test", "api_url": slack.api_url, ...}
        await slack.wait_for("chat.postMessage")

Web API calls (JSON or form bodies) are recorded in `calls`; `fail()` scripts errors,
including 429 with Retry-After. The WebSocket at /link sends `hello`, takes envelopes from
`push()` and records the client's acks. Messages the bot posts, streams
(chat.startStream / appendStream / stopStream), updates and deletes are kept in
`messages`; `stream_methods = False` makes the stream methods refused (`stream_refusals`:
in one channel only).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import aiohttp
from aiohttp import web

from gateway.app.app import App
from gateway.media.sniff import sniff
from tests.fakes.server import LocalServer
from tests.harness import configured_gateway

SECRET = "test-signing-secret"
BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM = "T0TEAM"
BOT_USER = "UBOT"
BOT_ID = "BBOT"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    token: str
    at: float = field(default_factory=time.monotonic)
    result: dict[str, Any] = field(default_factory=dict)  # what the fake answered


@dataclass
class SharedFile:
    """A file in the fake workspace: one a person shared, or one the bot uploaded."""

    id: str
    name: str
    mimetype: str
    data: bytes
    title: str = ""
    channel: str = ""  # where an upload was shared (completeUploadExternal)
    thread_ts: str | None = None
    initial_comment: str | None = None
    complete: bool = False

    def info(self, base: str) -> dict[str, Any]:
        url = f"{base}files-pri/{TEAM}-{self.id}/{self.name}"
        return {
            "id": self.id,
            "name": self.name,
            "title": self.title or self.name,
            "mimetype": self.mimetype,
            "filetype": self.name.rsplit(".", 1)[-1],
            "size": len(self.data),
            "url_private": url,
            "url_private_download": url + "?download=1",
            "mode": "hosted",
        }


@dataclass
class _Failure:
    error: str
    status: int
    headers: dict[str, str]
    times: int


@dataclass
class Message:
    """A message of the bot's as Slack shows it: its text, and the task cards a stream added."""

    channel: str
    ts: str
    text: str
    thread_ts: str | None = None
    streaming: bool = False
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    deleted: bool = False


@dataclass
class FakeSlack(LocalServer):
    calls: list[Call] = field(default_factory=list)
    acks: dict[str, dict[str, Any]] = field(default_factory=dict)
    connections: int = 0
    messages: dict[str, Message] = field(default_factory=dict)  # by ts
    stream_methods: bool = True  # False: the workspace or app cannot use chat.*Stream
    # channel -> the error chat.startStream answers there (e.g. an archived channel)
    stream_refusals: dict[str, str] = field(default_factory=dict)
    # (channel, thread ts) -> what people wrote there, as conversations.replies returns it
    threads: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__()
        self.files: dict[str, SharedFile] = {}
        self.downloads: list[str] = []  # file ids served, after the token was checked
        self._file_ids = itertools.count(1)
        self._failures: dict[str, deque[_Failure]] = {}
        self._changed = asyncio.Condition()
        self._sockets: list[web.WebSocketResponse] = []
        self._ts = itertools.count(1)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def share(self, name: str, data: bytes, mimetype: str, **extra: Any) -> dict[str, Any]:
        """A file a person shares: its bytes are served to the bot; returns the event's file
        object (extra keys such as subtype="slack_audio" are added to it)."""
        file = SharedFile(f"F{next(self._file_ids):08d}", name, mimetype, data)
        self.files[file.id] = file
        return {**file.info(self.base_url), **extra}

    def uploads(self) -> list[SharedFile]:
        """Files the bot uploaded and shared (completeUploadExternal), in order."""
        return [f for f in self.files.values() if f.complete]

    # -- scripting and inspection --------------------------------------------------------

    def fail(
        self,
        method: str,
        error: str,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
        times: int = 1,
    ) -> None:
        """The next `times` calls of `method` answer {"ok": false, "error": error}."""
        failure = _Failure(error, status, headers or {}, times)
        self._failures.setdefault(method, deque()).append(failure)

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        return [c.params for c in self.calls if c.method == method]

    def methods(self, *names: str) -> list[str]:
        """The order in which these methods were called."""
        return [c.method for c in self.calls if c.method in names]

    async def wait_for(
        self, method: str, count: int = 1, seconds: float = 5
    ) -> list[dict[str, Any]]:
        """Wait until `method` was called at least `count` times; returns those calls."""
        await self._until(lambda: len(self.calls_to(method)) >= count, seconds)
        return self.calls_to(method)

    async def wait_for_post(self, text: str, seconds: float = 5) -> dict[str, Any]:
        """Wait for a chat.postMessage with exactly this text; returns its parameters."""

        def posted() -> list[dict[str, Any]]:
            return [p for p in self.calls_to("chat.postMessage") if p.get("text") == text]

        await self._until(lambda: bool(posted()), seconds)
        return posted()[0]

    async def wait_for_answer(self, text: str, seconds: float = 5) -> Message:
        """Wait for a finished message of the bot's with exactly this text, posted whole or
        streamed: a turn that waits on a person or a slow tool may have opened a stream for
        its progress lines, and its answer then goes into that stream."""

        def shown() -> list[Message]:
            return [m for m in self.bot_messages() if m.text == text and not m.streaming]

        await self._until(lambda: bool(shown()), seconds)
        return shown()[0]

    async def wait_for_buttons(self, seconds: float = 5) -> Call:
        """Wait for a chat.postMessage that carries an actions block; returns that call."""

        def with_buttons() -> list[Call]:
            return [
                c
                for c in self.calls
                if c.method == "chat.postMessage"
                and any(b.get("type") == "actions" for b in c.params.get("blocks") or ())
            ]

        await self._until(lambda: bool(with_buttons()), seconds)
        return with_buttons()[0]

    async def wait_for_ack(self, envelope_id: str, seconds: float = 5) -> dict[str, Any]:
        await self._until(lambda: envelope_id in self.acks, seconds)
        return self.acks[envelope_id]

    async def _until(self, done: Any, seconds: float) -> None:
        async with asyncio.timeout(seconds), self._changed:
            await self._changed.wait_for(done)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- Socket Mode ---------------------------------------------------------------------

    async def push(
        self, kind: str, payload: dict[str, Any], *, retry_attempt: int = 0, seconds: float = 5
    ) -> str:
        """Send an envelope (events_api, slash_commands, interactive) to the connected client."""
        await self._until(lambda: bool(self._sockets), seconds)
        envelope_id = uuid.uuid4().hex
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
            "payload": payload,
        }
        await self._sockets[-1].send_str(json.dumps(envelope))
        return envelope_id

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections += 1
        self._sockets.append(ws)
        await ws.send_str(json.dumps({"type": "hello", "num_connections": 1}))
        await self._notify()
        try:
            async for message in ws:
                if message.type is aiohttp.WSMsgType.TEXT:
                    ack = json.loads(message.data)
                    self.acks[ack["envelope_id"]] = ack
                    await self._notify()
        finally:
            self._sockets.remove(ws)
        return ws

    # -- Web API -------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        token = token or str(params.pop("token", ""))
        call = Call(method, params, token)
        self.calls.append(call)
        queue = self._failures.get(method)
        if queue:
            failure = queue[0]
            failure.times -= 1
            if failure.times <= 0:
                queue.popleft()
            call.result = {"ok": False, "error": failure.error}
            await self._notify()
            return _json(call.result, failure.status, failure.headers)
        expected = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token != expected:
            call.result = {"ok": False, "error": "invalid_auth"}
        else:
            try:
                call.result = {"ok": True, **self._result(method, params)}
            except _SlackError as exc:
                call.result = {"ok": False, "error": exc.code}
        await self._notify()
        return _json(call.result)

    def _result(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "url": "https://fake.slack.com/",
                "team": "Fake Team",
                "user": "chatgate",
                "team_id": TEAM,
                "user_id": BOT_USER,
                "bot_id": BOT_ID,
            }
        if method == "chat.postMessage":
            ts = self.next_ts()
            channel = str(params.get("channel"))
            self.messages[ts] = Message(channel, ts, str(params.get("text") or ""))
            self.messages[ts].thread_ts = params.get("thread_ts")
            message = {"type": "message", "text": params.get("text"), "ts": ts, "bot_id": BOT_ID}
            return {"channel": params.get("channel"), "ts": ts, "message": message}
        if method == "chat.update":
            found = self._message(params)
            if found is not None:
                found.text = str(params.get("text") or "")
            return {"channel": params.get("channel"), "ts": params.get("ts")}
        if method == "chat.delete":
            self._message(params, need=True).deleted = True  # type: ignore[union-attr]
            return {"channel": params.get("channel"), "ts": params.get("ts")}
        if method in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
            return self._stream(method, params)
        if method == "chat.postEphemeral":
            return {"message_ts": self.next_ts()}
        if method == "apps.connections.open":
            return {"url": f"ws://127.0.0.1:{self.port}/link?ticket={uuid.uuid4().hex}"}
        if method == "files.info":
            file = self.files.get(str(params.get("file")))
            if file is None:
                raise _SlackError("file_not_found")
            return {"file": file.info(self.base_url)}
        if method == "files.getUploadURLExternal":
            name, length = str(params.get("filename")), int(params.get("length") or 0)
            if not name or length <= 0:
                raise _SlackError("invalid_arguments")
            file = SharedFile(f"F{next(self._file_ids):08d}", name, "", b"")
            self.files[file.id] = file
            return {"upload_url": f"{self.base_url}upload/{file.id}", "file_id": file.id}
        if method == "files.completeUploadExternal":
            return {"files": [self._complete(entry, params) for entry in _json_list(params)]}
        if method == "conversations.replies":
            return self._replies(params)
        return {}  # reactions.add / reactions.remove and the like

    def add_thread_message(self, channel: str, thread_ts: str, user: str, text: str) -> str:
        """A person's message in a thread (its first one starts it); returns its ts."""
        thread = self.threads.setdefault((channel, thread_ts), [])
        whole, _, fraction = thread_ts.partition(".")
        ts = f"{whole}.{int(fraction or 0) + len(thread):06d}"  # just after the one before
        thread.append(
            {"type": "message", "user": user, "text": text, "ts": ts, "thread_ts": thread_ts}
        )
        return ts

    def _replies(self, params: dict[str, Any]) -> dict[str, Any]:
        thread = self.threads.get((str(params.get("channel")), str(params.get("ts"))))
        if thread is None:
            raise _SlackError("thread_not_found")
        limit = int(params.get("limit") or 1000)
        return {"messages": thread[:limit], "has_more": len(thread) > limit}

    def _message(self, params: dict[str, Any], *, need: bool = False) -> Message | None:
        found = self.messages.get(str(params.get("ts")))
        if found is not None and found.deleted:
            found = None
        if found is None and need:
            raise _SlackError("message_not_found")
        return found

    def _stream(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if not self.stream_methods:
            raise _SlackError("not_allowed_token_type")
        channel = str(params.get("channel") or "")
        if method == "chat.startStream" and channel in self.stream_refusals:
            raise _SlackError(self.stream_refusals[channel])
        if method == "chat.startStream":
            if not params.get("thread_ts"):
                raise _SlackError("invalid_arguments")
            if not channel.startswith("D") and not (
                params.get("recipient_user_id") and params.get("recipient_team_id")
            ):
                raise _SlackError("invalid_arguments")  # required outside DMs
            ts = self.next_ts()
            message = Message(channel, ts, "", str(params["thread_ts"]), streaming=True)
            self.messages[ts] = message
        else:
            found = self._message(params, need=True)
            assert found is not None
            if not found.streaming:
                raise _SlackError("message_not_in_streaming_state")
            message = found
        chunks = list(params.get("chunks") or [])
        if params.get("markdown_text"):
            chunks.append({"type": "markdown_text", "text": params["markdown_text"]})
        for chunk in chunks:
            if chunk.get("type") == "markdown_text":
                message.text += str(chunk.get("text", ""))
            elif chunk.get("type") == "task_update":
                message.tasks[str(chunk["id"])] = chunk
            else:
                raise _SlackError("invalid_chunks")
        if method == "chat.stopStream":
            message.streaming = False
        return {"channel": channel, "ts": message.ts}

    def bot_messages(self, channel: str | None = None) -> list[Message]:
        """The bot's messages not deleted, oldest first."""
        return [
            m
            for m in self.messages.values()
            if not m.deleted and (channel is None or m.channel == channel)
        ]

    def _complete(self, entry: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        file = self.files.get(str(entry.get("id")))
        if file is None or not file.data:
            raise _SlackError("file_not_found")
        file.title = str(entry.get("title") or file.name)
        file.channel = str(params.get("channel_id") or "")
        file.thread_ts = params.get("thread_ts")
        file.initial_comment = params.get("initial_comment")
        file.complete = True
        return {"id": file.id, "title": file.title}

    async def _upload(self, request: web.Request) -> web.Response:
        file = self.files.get(request.match_info["file_id"])
        if file is None or file.complete:
            return web.Response(status=404, text="unknown upload")
        file.data = await request.read()
        file.mimetype = sniff(file.data)  # Slack types uploads by their content too
        await self._notify()
        return web.Response(text=f"OK - {len(file.data)}")

    async def _file(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}":
            # Slack answers a missing or wrong token with its sign-in page, not an error.
            return web.Response(text="<html>sign in</html>", content_type="text/html")
        team_file = request.match_info["team_file"]
        file = self.files.get(team_file.removeprefix(f"{TEAM}-"))
        if file is None:
            return web.Response(status=404)
        self.downloads.append(file.id)
        return web.Response(body=file.data, content_type=file.mimetype)

    def next_ts(self) -> str:
        n = next(self._ts)
        return f"{1_700_000_000 + n}.{n:06d}"

    # -- lifecycle -----------------------------------------------------------------------

    max_body = 32 * 1024 * 1024

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/link", self._link)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_get("/files-pri/{team_file}/{name}", self._file)

    async def before_stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()


class _SlackError(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def _json_list(params: dict[str, Any]) -> list[dict[str, Any]]:
    value = params.get("files")
    parsed = json.loads(value) if isinstance(value, str) else value
    return [item for item in parsed or [] if isinstance(item, dict)]


async def _params(request: web.Request) -> dict[str, Any]:
    # slack_sdk sends some methods (reactions.*) as query parameters on a POST.
    params: dict[str, Any] = dict(request.query)
    if request.content_type == "application/json":
        params.update(await request.json())
        return params
    if request.method == "GET":
        return params
    form = await request.post()
    params.update({k: v for k, v in form.items() if isinstance(v, str)})
    for key in ("blocks", "attachments"):  # form bodies carry these as JSON text
        if isinstance(params.get(key), str):
            params[key] = json.loads(params[key])
    return params


def _json(
    body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/json", headers=headers
    )


# -- signed Events API requests ---------------------------------------------------------------


def signature_headers(
    body: str, *, secret: str = SECRET, timestamp: int | None = None
) -> dict[str, str]:
    """The headers Slack adds: v0=HMAC-SHA256(secret, "v0:{ts}:{body}")."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:{body}".encode(), hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


@dataclass
class Delivery:
    status: int
    text: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.text)


async def deliver(
    url: str,
    body: str,
    *,
    form: bool = False,
    headers: dict[str, str] | None = None,
    signed: bool = True,
    secret: str = SECRET,
    timestamp: int | None = None,
) -> Delivery:
    """POST `body` to the gateway as Slack would; `headers` add to or override the signature."""
    sent = {"Content-Type": "application/x-www-form-urlencoded" if form else "application/json"}
    if signed:
        sent.update(signature_headers(body, secret=secret, timestamp=timestamp))
    sent.update(headers or {})
    started = time.monotonic()
    async with aiohttp.ClientSession() as session, session.post(url, data=body, headers=sent) as r:
        text = await r.text()
    return Delivery(r.status, text, time.monotonic() - started)


def event_callback(
    event: dict[str, Any], *, event_id: str | None = None, team: str = TEAM
) -> dict[str, Any]:
    """An Events API envelope around `event` (as both HTTP and Socket Mode carry it)."""
    return {
        "token": "verification-token",
        "team_id": team,
        "api_app_id": "A0APP",
        "type": "event_callback",
        "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team, "user_id": BOT_USER, "is_bot": True}],
        "event": event,
    }


def mention(
    text: str, *, channel: str = "C1", user: str = "U1", ts: str = "1000.000100", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER}> {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        **extra,
    }


def message(
    text: str, *, channel: str = "D1", user: str = "U1", ts: str = "2000.000100", **extra: Any
) -> dict[str, Any]:
    return {
        "type": "message",
        "channel_type": "im" if channel.startswith("D") else "channel",
        "user": user,
        "text": text,
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        **extra,
    }


def slash_command(
    text: str, *, channel: str = "C1", user: str = "U1", command: str = "/chatgate"
) -> dict[str, str]:
    return {
        "token": "verification-token",
        "team_id": TEAM,
        "channel_id": channel,
        "channel_name": "general",
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "response_url": "https://hooks.invalid/commands/1",
        "trigger_id": uuid.uuid4().hex,
        "api_app_id": "A0APP",
    }


def block_actions(
    *,
    user: str,
    value: str,
    channel: str,
    message_ts: str,
    action_id: str = "cg:0",
    thread_ts: str | None = None,
) -> dict[str, Any]:
    message: dict[str, Any] = {"type": "message", "ts": message_ts, "text": "", "bot_id": BOT_ID}
    if thread_ts:
        message["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "fake"},
        "user": {"id": user, "username": user.lower(), "team_id": TEAM},
        "api_app_id": "A0APP",
        "token": "verification-token",
        "trigger_id": uuid.uuid4().hex,
        "container": {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        },
        "channel": {"id": channel, "name": "general"},
        "message": message,
        "response_url": "https://hooks.invalid/actions/1",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "b1",
                "value": value,
                "action_ts": str(time.time()),
            }
        ],
    }


def form_body(fields: dict[str, str]) -> str:
    return urlencode(fields)


def payload_body(payload: dict[str, Any]) -> str:
    """Interactivity requests carry their JSON as a form field named `payload`."""
    return urlencode({"payload": json.dumps(payload)})


# -- a gateway with the Slack adapter ---------------------------------------------------------


# The real App with the adapters its settings configure (Slack here), started.
slack_gateway = configured_gateway


def events_url(app: App) -> str:
    assert app.http is not None and app.http.port
    return f"http://127.0.0.1:{app.http.port}/slack/events"
