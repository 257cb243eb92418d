"""A fake Discord for end-to-end tests: REST under /api/v10 and a gateway websocket (aiohttp).

The real discord.py talks to it through `Route.BASE` and `DEFAULT_GATEWAY`. Every REST call
is recorded; 429s (with `retry_after`) and 403s can be injected; `dispatch()` pushes gateway
events and `drop()` cuts the websocket so the client resumes. The world is one guild with a
channel, a free-response channel and a thread, a DM channel, and two people (alice has a role).

    async with FakeDiscord() as fake:
        settings.discord.api_url, settings.discord.gateway_url = fake.api_url, fake.gateway_url
        await fake.send_message(f"hello <@{BOT_ID}>", author=ALICE)
        reply = await fake.wait_for("POST", rf"/channels/{GENERAL_ID}/messages")
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes.server import LocalServer

# Real-length snowflakes: discord.py's raw_mentions only matches 15 to 20 digits.
_BASE = 900_000_000_000_000_000
BOT_ID = _BASE + 100
APP_ID = BOT_ID
GUILD_ID = _BASE + 200
GENERAL_ID = _BASE + 300  # a text channel
FREE_ID = _BASE + 301  # a channel tests configure as free-response
THREAD_ID = _BASE + 302  # a public thread in GENERAL
DM_ID = _BASE + 400
MEMBER_ROLE_ID = _BASE + 500
ALICE = _BASE + 1001  # has MEMBER_ROLE_ID
BOB = _BASE + 1002  # no roles
OTHER_BOT = _BASE + 1003

JSON = {"Content-Type": "application/json"}  # exactly: discord.py parses nothing else
_EPOCH_MS = 1_420_070_400_000


def user(user_id: int, name: str | None = None, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": str(user_id),
        "username": name or f"user{user_id}",
        "discriminator": "0",
        "global_name": None,
        "avatar": None,
        "bot": bot,
        "flags": 0,
    }


USERS = {
    BOT_ID: user(BOT_ID, "chatgate", bot=True),
    ALICE: user(ALICE, "alice"),
    BOB: user(BOB, "bob"),
    OTHER_BOT: user(OTHER_BOT, "otherbot", bot=True),
}
ROLES = {ALICE: [str(MEMBER_ROLE_ID)], BOB: [], OTHER_BOT: [], BOT_ID: []}


def member(user_id: int, *, with_user: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {
        "roles": ROLES[user_id],
        "joined_at": "2024-01-01T00:00:00+00:00",
        "deaf": False,
        "mute": False,
        "flags": 0,  # discord.py reads it unconditionally
        "permissions": "8",
    }
    if with_user:
        data["user"] = USERS[user_id]
    return data


def _now() -> str:
    return datetime.now(UTC).isoformat()


def text_channel(channel_id: int, name: str) -> dict[str, Any]:
    return {
        "id": str(channel_id),
        "type": 0,
        "name": name,
        "position": 0,
        "guild_id": str(GUILD_ID),
        "permission_overwrites": [],
        "nsfw": False,
        "parent_id": None,
    }


def thread_channel(thread_id: int, parent_id: int, name: str, owner_id: int) -> dict[str, Any]:
    return {
        "id": str(thread_id),
        "type": 11,
        "guild_id": str(GUILD_ID),
        "parent_id": str(parent_id),
        "owner_id": str(owner_id),
        "name": name,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "flags": 0,
        "thread_metadata": {
            "archived": False,
            "auto_archive_duration": 1440,
            "archive_timestamp": _now(),
            "locked": False,
        },
    }


@dataclass
class Call:
    """One REST request as the fake received it (path is below /api/v10)."""

    method: str
    path: str
    query: dict[str, str]
    body: Any
    authorized: bool
    at: float = field(default_factory=time.monotonic)
    files: list[SentFile] = field(default_factory=list)  # multipart uploads with the call


@dataclass
class SentFile:
    filename: str
    content_type: str
    data: bytes


@dataclass
class _Failure:
    method: str
    pattern: re.Pattern[str]
    status: int
    body: dict[str, Any]
    headers: dict[str, str]
    times: int


@dataclass
class _Connection:
    ws: web.WebSocketResponse
    seq: int = 0
    ready: bool = False
    shard: tuple[int, int] | None = None


class FakeDiscord(LocalServer):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self.messages: dict[str, dict[str, Any]] = {}  # id -> message payload, as stored
        self.identifies: list[dict[str, Any]] = []
        self.resumes: list[dict[str, Any]] = []
        self.threads: dict[str, dict[str, Any]] = {
            str(THREAD_ID): thread_channel(THREAD_ID, GENERAL_ID, "design", ALICE)
        }
        self.identify_close_code: int | None = None  # e.g. 4014: privileged intent not enabled
        self._connections: list[_Connection] = []
        self._failures: list[_Failure] = []
        self._interactions: dict[str, dict[str, Any]] = {}  # token -> interaction payload
        self.cdn: dict[str, tuple[bytes, str]] = {}  # attachment id -> (bytes, content type)
        self.cdn_gets: list[str] = []  # attachment ids served
        self.expired: set[str] = set()  # attachment URLs (path + query) that answer 404
        self._counter = itertools.count(1)
        self._changed = asyncio.Condition()
        self._routes: list[tuple[str, re.Pattern[str], Any]] = [
            ("GET", re.compile(r"/users/@me"), self._me),
            ("GET", re.compile(r"/oauth2/applications/@me"), self._application),
            ("GET", re.compile(r"/gateway/bot"), self._gateway_bot),
            ("PUT", re.compile(r"/applications/\d+(?:/guilds/(\d+))?/commands"), self._commands),
            ("POST", re.compile(r"/users/@me/channels"), self._open_dm),
            ("POST", re.compile(r"/channels/(\d+)/messages"), self._create_message),
            ("GET", re.compile(r"/channels/(\d+)/messages"), self._channel_history),
            ("PATCH", re.compile(r"/channels/(\d+)/messages/(\d+)"), self._edit_message),
            ("DELETE", re.compile(r"/channels/(\d+)/messages/(\d+)"), self._delete_message),
            ("POST", re.compile(r"/channels/(\d+)/typing"), self._typing),
            (
                "PUT",
                re.compile(r"/channels/(\d+)/messages/(\d+)/reactions/([^/]+)/@me"),
                self._react,
            ),
            ("POST", re.compile(r"/channels/(\d+)/messages/(\d+)/threads"), self._create_thread),
            ("POST", re.compile(r"/interactions/(\d+)/([^/]+)/callback"), self._callback),
            ("POST", re.compile(r"/attachments/refresh-urls"), self._refresh_urls),
            ("POST", re.compile(r"/webhooks/\d+/([^/]+)"), self._followup),
            (
                "PATCH",
                re.compile(r"/webhooks/\d+/([^/]+)/messages/(@original|\d+)"),
                self._edit_hook,
            ),
            (
                "DELETE",
                re.compile(r"/webhooks/\d+/([^/]+)/messages/(@original|\d+)"),
                self._delete_hook,
            ),
        ]
        self.deleted: set[str] = set()  # message ids deleted (by the bot or, in tests, a person)
        self.written: list[dict[str, Any]] = []  # what people wrote (send_message), in order

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    max_body = 32 * 1024 * 1024

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", "/api/v10/{tail:.*}", self._rest)
        app.router.add_get("/attachments/{id}/{filename}", self._attachment)

    async def before_stop(self) -> None:
        for conn in list(self._connections):
            await conn.ws.close()

    # -- test controls ---------------------------------------------------------------------

    def fail(
        self,
        method: str,
        path: str,
        status: int,
        body: dict[str, Any],
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer the next `times` calls whose path matches the regex `path` with an error."""
        self._failures.append(
            _Failure(method, re.compile(path), status, body, headers or {}, times)
        )

    def rate_limit(self, method: str, path: str, retry_after: float, *, times: int = 1) -> None:
        # discord.py treats a 429 without a Via header as a Cloudflare ban, not a rate limit.
        body = {"message": "You are being rate limited.", "retry_after": retry_after}
        self.fail(method, path, 429, {**body, "global": False}, times=times, headers={"Via": "1.1"})

    def forbid(self, method: str, path: str, *, times: int = 1) -> None:
        self.fail(method, path, 403, {"message": "Missing Permissions", "code": 50013}, times=times)

    def calls_to(self, method: str, path: str) -> list[Call]:
        pattern = re.compile(path)
        return [c for c in self.calls if c.method == method and pattern.fullmatch(c.path)]

    async def wait_for(
        self, method: str, path: str, *, count: int = 1, within: float = 5.0
    ) -> list[Call]:
        """Wait until `count` calls matching (method, path regex) arrived; returns them all."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.calls_to(method, path)) >= count)
        return self.calls_to(method, path)

    async def wait_until(self, predicate: Callable[[], bool], *, within: float = 5.0) -> None:
        """Wait until `predicate()` holds; it is checked after every REST call."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    async def wait_for_post(self, path: str, content: str, *, within: float = 5.0) -> Call:
        """Wait for a POST to `path` (regex) whose content is `content`, e.g. one turn's answer.

        Counting calls alone races with queue notices ("Got it...") when a message arrives
        while the previous turn is still saving its history.
        """

        def found() -> Call | None:
            calls = self.calls_to("POST", path)
            return next((c for c in calls if (c.body or {}).get("content") == content), None)

        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: found() is not None)
        call = found()
        assert call is not None
        return call

    async def wait_connected(self, count: int = 1, within: float = 5.0) -> None:
        """Wait until `count` websocket sessions have identified or resumed."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: sum(c.ready for c in self._connections) >= count)

    @property
    def connected(self) -> int:
        return sum(c.ready for c in self._connections)

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a DISPATCH to every connected session, with increasing sequence numbers."""
        for conn in self._connections:
            if conn.ready:
                await self._send(conn, event, data)

    async def drop(self, code: int = 4000) -> None:
        """Close every websocket; 4000 makes discord.py reconnect and RESUME."""
        for conn in list(self._connections):
            conn.ready = False
            await conn.ws.close(code=code)

    # -- attachments (the CDN) ---------------------------------------------------------------

    def attachment(
        self, filename: str, data: bytes, content_type: str, *, voice: bool = False
    ) -> dict[str, Any]:
        """An attachment payload for `send_message`, its bytes served at its (signed) URL."""
        attachment_id = self.snowflake()
        self.cdn[attachment_id] = (data, content_type)
        url = f"http://127.0.0.1:{self.port}/attachments/{attachment_id}/{filename}?ex=1&hm=sig"
        item: dict[str, Any] = {
            "id": attachment_id,
            "filename": filename,
            "size": len(data),
            "url": url,
            "proxy_url": url,
            "content_type": content_type,
        }
        if voice:
            item.update(duration_secs=2.5, waveform="AAAAAAAA", flags=0)
        return item

    async def _attachment(self, request: web.Request) -> web.Response:
        if str(request.rel_url) in self.expired:
            return web.Response(status=404, text="This content is no longer available.")
        found = self.cdn.get(request.match_info["id"])
        if found is None:
            return web.Response(status=404)
        self.cdn_gets.append(request.match_info["id"])
        return web.Response(body=found[0], content_type=found[1])

    def _refresh_urls(self, call: Call) -> dict[str, Any]:
        refreshed = []
        for url in (call.body or {}).get("attachment_urls", []):
            fresh = url.split("?", 1)[0] + "?ex=2&hm=fresh"
            refreshed.append({"original": url, "refreshed": fresh})
        return {"refreshed_urls": refreshed}

    # -- events the tests push ---------------------------------------------------------------

    def snowflake(self) -> str:
        return str(((int(time.time() * 1000) - _EPOCH_MS) << 22) | next(self._counter))

    async def send_message(
        self,
        content: str | None,
        *,
        author: int = ALICE,
        channel: int = GENERAL_ID,
        dm: bool = False,
        reply_to: dict[str, Any] | None = None,
        attachments: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """A person writes a message (MESSAGE_CREATE); returns its payload. `content` None
        is sent as JSON null, as Discord does for some messages without text."""
        message = self._message(str(DM_ID if dm else channel), content, USERS[author])
        mentioned = re.findall(r"<@!?(\d+)>", content or "")
        message["mentions"] = [USERS[int(i)] for i in mentioned if int(i) in USERS]
        message["attachments"] = attachments or []
        if not dm:
            message["guild_id"] = str(GUILD_ID)
            message["member"] = member(author, with_user=False)
        if reply_to is not None:
            message["type"] = 19
            message["message_reference"] = {
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
            }
            message["referenced_message"] = reply_to
        self.written.append(message)
        await self.dispatch("MESSAGE_CREATE", message)
        return message

    async def slash(
        self,
        name: str,
        options: dict[str, str] | None = None,
        *,
        user_id: int = ALICE,
        channel: int = GENERAL_ID,
        dm: bool = False,
    ) -> dict[str, Any]:
        """A person runs a slash command (INTERACTION_CREATE type 2); returns the payload."""
        data: dict[str, Any] = {"id": self.snowflake(), "name": name, "type": 1}
        if options:
            data["options"] = [{"name": k, "type": 3, "value": v} for k, v in options.items()]
        interaction = self._interaction(2, data, user_id, channel, dm)
        await self.dispatch("INTERACTION_CREATE", interaction)
        return interaction

    async def press(
        self, message: dict[str, Any], custom_id: str, *, user_id: int = ALICE
    ) -> dict[str, Any]:
        """A person clicks a button on `message` (INTERACTION_CREATE type 3)."""
        data = {"custom_id": custom_id, "component_type": 2}
        channel = int(message["channel_id"])
        interaction = self._interaction(3, data, user_id, channel, channel == DM_ID)
        interaction["message"] = message
        await self.dispatch("INTERACTION_CREATE", interaction)
        return interaction

    def custom_ids(self, message: dict[str, Any]) -> list[str]:
        return [
            button["custom_id"]
            for row in message.get("components", [])
            for button in row.get("components", [])
        ]

    def channel_payload(self, channel_id: int) -> dict[str, Any]:
        if channel_id == DM_ID:
            return {"id": str(DM_ID), "type": 1, "recipients": [USERS[ALICE]]}
        if str(channel_id) in self.threads:
            return self.threads[str(channel_id)]
        return text_channel(channel_id, "free" if channel_id == FREE_ID else "general")

    # -- gateway ------------------------------------------------------------------------------

    def _guild(self) -> dict[str, Any]:
        return {
            "id": str(GUILD_ID),
            "name": "test guild",
            "unavailable": False,
            "owner_id": str(ALICE),
            "member_count": 3,
            "large": False,
            "roles": [
                {"id": str(GUILD_ID), "name": "@everyone", "permissions": "0", "position": 0},
                {"id": str(MEMBER_ROLE_ID), "name": "member", "permissions": "0", "position": 1},
            ],
            "channels": [text_channel(GENERAL_ID, "general"), text_channel(FREE_ID, "free")],
            "threads": list(self.threads.values()),
            "members": [member(BOT_ID), member(ALICE), member(BOB)],
            "emojis": [],
            "stickers": [],
            "features": [],
            "voice_states": [],
            "presences": [],
        }

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        conn = _Connection(ws)
        self._connections.append(conn)
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}}))
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    continue
                payload = json.loads(msg.data)
                await self._on_frame(conn, payload["op"], payload.get("d"))
        finally:
            self._connections.remove(conn)
        return ws

    async def _on_frame(self, conn: _Connection, op: int, data: Any) -> None:
        if op == 1:
            await conn.ws.send_str(json.dumps({"op": 11}))
        elif op == 2:
            self.identifies.append(data)
            if self.identify_close_code is not None:
                await conn.ws.close(code=self.identify_close_code)
                return
            shard = data.get("shard")
            conn.shard = (shard[0], shard[1]) if shard else None
            # Discord puts a guild on shard (guild_id >> 22) % shard_count.
            here = conn.shard is None or (GUILD_ID >> 22) % conn.shard[1] == conn.shard[0]
            ready = {
                "v": 10,
                "user": USERS[BOT_ID],
                "session_id": uuid.uuid4().hex,
                "resume_gateway_url": self.gateway_url,
                "guilds": [{"id": str(GUILD_ID), "unavailable": True}] if here else [],
                "application": {"id": str(APP_ID), "flags": 0},
                "private_channels": [],
                "relationships": [],
            }
            if shard:
                ready["shard"] = shard
            await self._send(conn, "READY", ready)
            if here:
                await self._send(conn, "GUILD_CREATE", self._guild())
            await self._mark_ready(conn)
        elif op == 6:
            self.resumes.append(data)
            conn.seq = int(data.get("seq") or 0)
            await self._send(conn, "RESUMED", {})
            await self._mark_ready(conn)

    async def _mark_ready(self, conn: _Connection) -> None:
        async with self._changed:
            conn.ready = True
            self._changed.notify_all()

    async def _send(self, conn: _Connection, event: str, data: dict[str, Any]) -> None:
        conn.seq += 1
        frame = {"op": 0, "t": event, "s": conn.seq, "d": data}
        if not conn.ws.closed:
            await conn.ws.send_str(json.dumps(frame))

    # -- REST ---------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        body: Any = None
        files: list[SentFile] = []
        if request.content_type == "multipart/form-data":  # a message with attachments
            form = await request.post()
            for name, value in form.items():
                if name == "payload_json" and isinstance(value, str):
                    body = json.loads(value)
                elif isinstance(value, web.FileField):
                    files.append(SentFile(value.filename, value.content_type, value.file.read()))
        else:
            raw = await request.read()
            if raw and request.content_type == "application/json":
                body = json.loads(raw)
        call = Call(
            request.method,
            path,
            dict(request.query),
            body,
            "Authorization" in request.headers,
            files=files,
        )
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()
        failure = self._take_failure(call)
        if failure is not None:
            return _json(failure.body, failure.status, failure.headers)
        for method, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if match is not None and method == request.method:
                try:
                    result = handler(call, *match.groups())
                except _RestError as exc:
                    return _json(exc.body, exc.status)
                if result is None:
                    return web.Response(status=204)
                return _json(result)
        return _json({"message": "404: Not Found", "code": 0}, 404)

    def _take_failure(self, call: Call) -> _Failure | None:
        for failure in self._failures:
            if failure.method == call.method and failure.pattern.fullmatch(call.path):
                failure.times -= 1
                if failure.times <= 0:
                    self._failures.remove(failure)
                return failure
        return None

    def _me(self, call: Call) -> dict[str, Any]:
        return USERS[BOT_ID]

    def _application(self, call: Call) -> dict[str, Any]:
        return {
            "id": str(APP_ID),
            "name": "chatgate",
            "description": "",
            "icon": None,
            "bot_public": True,
            "bot_require_code_grant": False,
            "verify_key": "00" * 32,
            "owner": USERS[ALICE],
            "flags": 0,
            "team": None,
        }

    def _gateway_bot(self, call: Call) -> dict[str, Any]:
        limit = {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}
        return {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}

    def _commands(self, call: Call, guild_id: str | None) -> list[dict[str, Any]]:
        echoed = []
        for command in call.body or []:
            item = {**command, "id": self.snowflake(), "application_id": str(APP_ID)}
            item.setdefault("version", "1")
            if guild_id:
                item["guild_id"] = guild_id
            echoed.append(item)
        return echoed

    def _message(
        self, channel_id: str, content: str | None, author: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "id": self.snowflake(),
            "channel_id": channel_id,
            "type": 0,
            "content": content,
            "author": author,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "flags": 0,
            "components": [],
        }

    def _store(self, channel_id: str, body: dict[str, Any], **extra: Any) -> dict[str, Any]:
        message = self._message(channel_id, body.get("content") or "", USERS[BOT_ID])
        message["components"] = body.get("components") or []
        message["flags"] = body.get("flags") or 0
        if body.get("message_reference"):
            message["message_reference"] = body["message_reference"]
        message.update(extra)
        self.messages[message["id"]] = message
        return message

    def _open_dm(self, call: Call) -> dict[str, Any]:
        """Open (or find again) the DM channel with a user: Alice's is DM_ID."""
        recipient = int((call.body or {}).get("recipient_id", 0))
        if recipient not in USERS:
            raise _RestError(400, {"message": "Invalid Recipient(s)", "code": 50033})
        channel = DM_ID if recipient == ALICE else DM_ID + recipient % 1000
        return {"id": str(channel), "type": 1, "recipients": [USERS[recipient]]}

    def _channel_history(self, call: Call, channel_id: str) -> list[dict[str, Any]]:
        """A channel's messages, newest first (GET /channels/{id}/messages?limit=)."""
        everything = [*self.written, *self.messages.values()]
        here = [m for m in everything if m["channel_id"] == channel_id]
        here.sort(key=lambda m: int(m["id"]), reverse=True)
        return here[: int(call.query.get("limit", 50))]

    def _create_message(self, call: Call, channel_id: str) -> dict[str, Any]:
        return self._store(channel_id, call.body or {}, attachments=self._sent_files(call))

    def _sent_files(self, call: Call) -> list[dict[str, Any]]:
        return [self.attachment(f.filename, f.data, f.content_type) for f in call.files]

    def _edit_message(self, call: Call, channel_id: str, message_id: str) -> dict[str, Any]:
        if message_id in self.deleted:
            raise _RestError(404, {"message": "Unknown Message", "code": 10008})
        message = self.messages.setdefault(
            message_id, {**self._message(channel_id, "", USERS[BOT_ID]), "id": message_id}
        )
        body = call.body or {}
        if "content" in body:
            message["content"] = body["content"]
        if "components" in body:
            message["components"] = body["components"] or []
        message["edited_timestamp"] = _now()
        return message

    def _delete_message(self, call: Call, channel_id: str, message_id: str) -> None:
        if message_id in self.deleted or message_id not in self.messages:
            raise _RestError(404, {"message": "Unknown Message", "code": 10008})
        self.deleted.add(message_id)

    def _delete_hook(self, call: Call, token: str, message_id: str) -> None:
        self._delete_message(call, "", message_id)

    def shown(self, message_id: str) -> str | None:
        """What a message shows now (after edits); None once deleted."""
        if message_id in self.deleted or message_id not in self.messages:
            return None
        return str(self.messages[message_id].get("content", ""))

    def _typing(self, call: Call, channel_id: str) -> None:
        return None

    def _react(self, call: Call, channel_id: str, message_id: str, emoji: str) -> None:
        return None

    def _create_thread(self, call: Call, channel_id: str, message_id: str) -> dict[str, Any]:
        name = (call.body or {}).get("name", "thread")
        thread = thread_channel(int(self.snowflake()), int(channel_id), name, BOT_ID)
        self.threads[thread["id"]] = thread
        # Discord announces the new thread on the gateway too; discord.py caches it from there.
        asyncio.get_running_loop().create_task(
            self.dispatch("THREAD_CREATE", {**thread, "newly_created": True})
        )
        return thread

    def _callback(self, call: Call, interaction_id: str, token: str) -> dict[str, Any]:
        body = call.body or {}
        kind = body.get("type")
        data = body.get("data") or {}
        interaction = self._interactions.get(token, {})
        result: dict[str, Any] = {
            "interaction": {
                "id": interaction_id,
                "type": interaction.get("type", 2),
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(data.get("flags", 0) & 64),
            }
        }
        if kind == 7 and "message" in interaction:  # UPDATE_MESSAGE edits the pressed message
            message = self.messages.get(interaction["message"]["id"], interaction["message"])
            if "content" in data:
                message["content"] = data["content"]
            if "components" in data:
                message["components"] = data["components"]
            result["resource"] = {"type": 7, "message": message}
        elif kind == 4:
            channel = str(interaction.get("channel_id", GENERAL_ID))
            result["resource"] = {"type": 4, "message": self._store(channel, data)}
        return result

    def _followup(self, call: Call, token: str) -> dict[str, Any]:
        interaction = self._interactions.get(token, {})
        channel = str(interaction.get("channel_id", GENERAL_ID))
        return self._store(
            channel, call.body or {}, webhook_id=str(APP_ID), attachments=self._sent_files(call)
        )

    def _edit_hook(self, call: Call, token: str, message_id: str) -> dict[str, Any]:
        interaction = self._interactions.get(token, {})
        channel = str(interaction.get("channel_id", GENERAL_ID))
        if message_id == "@original":
            message_id = interaction.get("message", {}).get("id", message_id)
        return self._edit_message(call, channel, message_id)

    def _interaction(
        self, kind: int, data: dict[str, Any], user_id: int, channel: int, dm: bool
    ) -> dict[str, Any]:
        interaction_id = self.snowflake()
        token = f"tok-{interaction_id}"
        payload: dict[str, Any] = {
            "id": interaction_id,
            "application_id": str(APP_ID),
            "type": kind,
            "data": data,
            "token": token,
            "version": 1,
            "app_permissions": "8",
            "locale": "en-US",
            "attachment_size_limit": 8_388_608,  # required by discord.py
            "entitlements": [],
            "authorizing_integration_owners": {},
        }
        if dm:
            payload.update(channel_id=str(DM_ID), channel=self.channel_payload(DM_ID), context=1)
            payload["user"] = USERS[user_id]
        else:
            payload.update(
                channel_id=str(channel),
                channel=self.channel_payload(channel),
                guild_id=str(GUILD_ID),
                guild_locale="en-US",
                context=0,
            )
            payload["member"] = member(user_id)
        self._interactions[token] = payload
        return payload


class _RestError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(body.get("message"))
        self.status = status
        self.body = body


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(data).encode(), status=status, headers={**JSON, **(headers or {})}
    )


def discord_section(fake: FakeDiscord, **overrides: Any) -> dict[str, Any]:
    """A `[discord]` settings section pointing at `fake`, fast to become ready."""
    section: dict[str, Any] = {
        "token": "fake-token",
        "api_url": fake.api_url,
        "gateway_url": fake.gateway_url,
        "guild_ready_timeout": 0.05,
        "leader_ttl": 1.5,
    }
    return {**section, **overrides}
