"""A fake Mattermost server for end-to-end tests: REST API v4 and the WebSocket (aiohttp).

It keeps posts, channels and files as the server would, records every REST call, checks the
bot token on REST and on the WebSocket upgrade, and broadcasts `posted` / `post_edited`
events to connected sockets. It also plays the server's outgoing side: `slash` posts a slash
command to the gateway with the command's token, and `press` posts a button's integration
context to its URL and applies the `update` the gateway answers with, as Mattermost does.
The world is one team with a channel, a second channel, a DM between alice and the bot, and
two people (alice and bob).

    async with FakeMattermost() as fake:
        settings.mattermost.url = fake.url
        await fake.post_as(ALICE, TOWN, "@chatgate hello")
        (reply,) = await fake.wait_for("POST", "/posts")
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import re
import secrets
import string
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

from tests.fakes.server import LocalServer

TOKEN = "mm-bot-token"
COMMAND_TOKEN = "mm-command-token"
_ALPHABET = string.ascii_lowercase + string.digits


def new_id() -> str:
    """A Mattermost id: 26 lowercase letters and digits."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(26))


BOT_ID = new_id()
ALICE = new_id()
BOB = new_id()
TEAM_ID = new_id()
TEAM_NAME = "core"
TOWN = new_id()  # town-square, a public channel
OTHER = new_id()  # off-topic, a private channel
DM = new_id()  # alice and the bot
USERS: dict[str, dict[str, Any]] = {
    BOT_ID: {"id": BOT_ID, "username": "chatgate", "is_bot": True},
    ALICE: {"id": ALICE, "username": "alice", "is_bot": False},
    BOB: {"id": BOB, "username": "bob", "is_bot": False},
}
MAX_POST = 16383


@dataclass
class Call:
    """One REST request as the fake received it (path below /api/v4)."""

    method: str
    path: str
    body: Any
    authorized: bool
    at: float = field(default_factory=time.monotonic)


@dataclass
class SocketSession:
    """A WebSocket connection as the server keeps it: its sequence and the events it was
    sent, so a client that reconnects with `connection_id` and `sequence_number` gets the
    events it missed (Mattermost keeps a short queue per connection)."""

    connection_id: str
    next_seq: int = 0
    sent: list[dict[str, Any]] = field(default_factory=list)
    ws: web.WebSocketResponse | None = None

    def frame(self, event: str, data: dict[str, Any], broadcast: dict[str, Any]) -> dict[str, Any]:
        frame = {"event": event, "data": data, "broadcast": broadcast, "seq": self.next_seq}
        self.next_seq += 1
        if event != "hello":  # kept for a resume; a hello is never sent again
            self.sent = [*self.sent[-(QUEUE - 1) :], frame]
        return frame


QUEUE = 128


@dataclass
class StoredFile:
    info: dict[str, Any]
    data: bytes


class FakeMattermost(LocalServer):
    max_body = 64 * 1024 * 1024

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self.posts: dict[str, dict[str, Any]] = {}
        self.ephemerals: list[dict[str, Any]] = []  # {user_id, channel_id, message}
        self.files: dict[str, StoredFile] = {}
        self.file_gets: list[str] = []
        self.channels: dict[str, dict[str, Any]] = {
            TOWN: _channel(TOWN, "O", "town-square"),
            OTHER: _channel(OTHER, "P", "off-topic"),
            DM: _channel(DM, "D", "__".join(sorted((ALICE, BOT_ID))), team=""),
        }
        self._sessions: dict[str, SocketSession] = {}
        self.connections = 0  # WebSocket connections that got a hello
        self.resumed = 0  # of them, reconnections that resumed their session
        self.refused_sockets = 0
        self._failures: list[tuple[str, re.Pattern[str], int, int]] = []
        self._changed = asyncio.Condition()
        self._http: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/api/v4/websocket", self._websocket)
        app.router.add_route("*", "/api/v4/{tail:.*}", self._rest)

    async def before_stop(self) -> None:
        await self.drop()
        if self._http is not None:
            await self._http.close()

    # -- test controls -----------------------------------------------------------------------

    def fail(self, method: str, path: str, status: int, *, times: int = 1) -> None:
        """Answer the next `times` calls matching (method, path regex) with `status`."""
        self._failures.append((method, re.compile(path), status, times))

    def calls_to(self, method: str, path: str) -> list[Call]:
        pattern = re.compile(path)
        return [c for c in self.calls if c.method == method and pattern.fullmatch(c.path)]

    async def wait_for(
        self, method: str, path: str, *, count: int = 1, within: float = 10.0
    ) -> list[Call]:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.calls_to(method, path)) >= count)
        return self.calls_to(method, path)

    async def wait_until(self, predicate: Any, *, within: float = 10.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    async def wait_for_post(
        self, channel: str, message: str, *, root_id: str = "", within: float = 10.0
    ) -> dict[str, Any]:
        """Wait until the bot's post in `channel` (and thread) shows `message`."""

        def found() -> dict[str, Any] | None:
            return next(
                (
                    p
                    for p in self.bot_posts(channel)
                    if p["message"] == message and p["root_id"] == root_id
                ),
                None,
            )

        await self.wait_until(lambda: found() is not None, within=within)
        post = found()
        assert post is not None
        return post

    def bot_posts(self, channel: str) -> list[dict[str, Any]]:
        return [
            p
            for p in self.posts.values()
            if p["user_id"] == BOT_ID and p["channel_id"] == channel and not p["delete_at"]
        ]

    async def wait_connected(self, count: int = 1, within: float = 10.0) -> None:
        await self.wait_until(lambda: self.connections >= count, within=within)

    def add_file(self, name: str, data: bytes, mime_type: str) -> str:
        """A file a person uploaded (to attach to `post_as`); its id."""
        info = _file_info(name, len(data), mime_type, ALICE)
        self.files[info["id"]] = StoredFile(info, data)
        return str(info["id"])

    async def post_as(
        self,
        user_id: str,
        channel_id: str,
        message: str,
        *,
        root_id: str = "",
        file_ids: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """A person posts (the server stores it and broadcasts `posted`); returns the post."""
        post = self._store_post(user_id, channel_id, message, root_id, list(file_ids), {})
        await self._broadcast_posted(post)
        return post

    async def broadcast(self, event: str, data: dict[str, Any], channel_id: str = "") -> None:
        """Any event, as the server sends it."""
        broadcast = {"omit_users": None, "user_id": "", "channel_id": channel_id, "team_id": ""}
        for session in list(self._sessions.values()):
            frame = session.frame(event, data, broadcast)
            if session.ws is not None and not session.ws.closed:
                await session.ws.send_str(json.dumps(frame))

    async def drop(self) -> None:
        """Close every WebSocket (the client reconnects)."""
        for session in list(self._sessions.values()):
            if session.ws is not None:
                await session.ws.close()

    # -- the server's outgoing requests ------------------------------------------------------

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = aiohttp.ClientSession()
        return self._http

    async def slash(
        self,
        url: str,
        text: str,
        *,
        user_id: str = ALICE,
        channel_id: str = TOWN,
        token: str = COMMAND_TOKEN,
        command: str = "/chatgate",
    ) -> tuple[int, Any]:
        """A person runs the slash command: the server posts the form with the token."""
        channel = self.channels[channel_id]
        form = {
            "channel_id": channel_id,
            "channel_name": channel["name"],
            "command": command,
            "response_url": f"{self.url}/hooks/commands/{new_id()}",
            "team_domain": TEAM_NAME,
            "team_id": TEAM_ID,
            "text": text,
            "token": token,
            "trigger_id": new_id(),
            "user_id": user_id,
            "user_name": USERS[user_id]["username"],
        }
        headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
        async with self._client().post(url, data=form, headers=headers) as response:
            body = await _json_or_text(response)
        ephemeral = isinstance(body, dict) and body.get("response_type") != "in_channel"
        if response.status == 200 and ephemeral and body.get("text"):
            self.ephemerals.append(
                {"user_id": user_id, "channel_id": channel_id, "message": body["text"]}
            )
        return response.status, body

    def actions(self, post: dict[str, Any]) -> list[dict[str, Any]]:
        """The buttons on a post, as stored (with their integrations)."""
        found: list[dict[str, Any]] = []
        for attachment in post["props"].get("attachments") or []:
            found.extend(attachment.get("actions") or [])
        return found

    async def press(self, post_id: str, action_id: str, *, user_id: str = ALICE) -> tuple[int, Any]:
        """A person presses a button: the server posts the action's context to its URL and
        applies the answer (`update` replaces the post, `ephemeral_text` goes to the presser)."""
        post = self.posts[post_id]
        action = next(a for a in self.actions(post) if a["id"] == action_id)
        integration = action["integration"]
        channel = self.channels[post["channel_id"]]
        body = {
            "user_id": user_id,
            "user_name": USERS[user_id]["username"],
            "channel_id": post["channel_id"],
            "channel_name": channel["name"],
            "team_id": channel["team_id"],
            "team_domain": TEAM_NAME,
            "post_id": post_id,
            "trigger_id": new_id(),
            "type": "button",
            "data_source": "",
            "context": integration.get("context") or {},
        }
        status, answer = await self.post_json(integration["url"], body)
        if status == 200 and isinstance(answer, dict):
            update = answer.get("update")
            if isinstance(update, dict):
                post["message"] = update.get("message", post["message"])
                post["props"] = update.get("props") or {}
                post["update_at"] = post["edit_at"] = _now_ms()
            if answer.get("ephemeral_text"):
                self.ephemerals.append(
                    {
                        "user_id": user_id,
                        "channel_id": post["channel_id"],
                        "message": answer["ephemeral_text"],
                    }
                )
        async with self._changed:
            self._changed.notify_all()
        return status, answer

    async def post_json(self, url: str, body: Any) -> tuple[int, Any]:
        async with self._client().post(url, json=body) as response:
            return response.status, await _json_or_text(response)

    # -- REST --------------------------------------------------------------------------------

    async def _rest(self, request: web.Request) -> web.StreamResponse:
        path = "/" + request.match_info["tail"]
        authorized = request.headers.get("Authorization") == f"Bearer {TOKEN}"
        if request.method == "POST" and path == "/files":
            body: Any = None
            files = await self._read_upload(request) if authorized else []
        else:
            raw = await request.read()
            body = json.loads(raw) if raw else None
            files = []
        call = Call(request.method, path, body, authorized)
        async with self._changed:
            self.calls.append(call)
            self._changed.notify_all()
        if not authorized:
            return _error(
                401, "api.context.session_expired.app_error", "Invalid or expired session"
            )
        for number, (method, pattern, status, times) in enumerate(self._failures):
            if method == request.method and pattern.fullmatch(path) and times > 0:
                self._failures[number] = (method, pattern, status, times - 1)
                headers = {"Retry-After": "0"} if status == 429 else {}
                return _error(status, "fake.failure", "injected failure", headers)
        try:
            answer = await self._answer(request.method, path, body, files)
        except LookupError as exc:
            return _error(404, "app.not_found", str(exc))
        except ValueError as exc:
            return _error(400, "api.invalid", str(exc))
        async with self._changed:
            self._changed.notify_all()
        if isinstance(answer, web.StreamResponse):
            return answer
        return web.json_response(answer, status=201 if request.method == "POST" else 200)

    async def _answer(self, method: str, path: str, body: Any, files: list[StoredFile]) -> Any:
        if (method, path) == ("GET", "/users/me"):
            return USERS[BOT_ID]
        if method == "GET" and (match := re.fullmatch(r"/teams/name/([\w-]+)", path)):
            if match[1] != TEAM_NAME:
                raise LookupError("team not found")
            return {"id": TEAM_ID, "name": TEAM_NAME, "display_name": "Core"}
        if method == "GET" and (match := re.fullmatch(r"/channels/(\w+)", path)):
            return self._known_channel(match[1])
        if (method, path) == ("POST", "/posts"):
            return await self._create_post(body)
        if (method, path) == ("POST", "/posts/ephemeral"):
            post = body["post"]
            self.ephemerals.append(
                {
                    "user_id": body["user_id"],
                    "channel_id": post["channel_id"],
                    "message": post["message"],
                }
            )
            return {"id": new_id(), **post}
        if method == "PUT" and (match := re.fullmatch(r"/posts/(\w+)/patch", path)):
            return await self._patch_post(match[1], body)
        if method == "DELETE" and (match := re.fullmatch(r"/posts/(\w+)", path)):
            post = self._known_post(match[1])
            post["delete_at"] = _now_ms()
            return {"status": "OK"}
        if method == "POST" and re.fullmatch(r"/users/(\w+)/typing", path):
            self._known_channel(body["channel_id"])
            return {"status": "OK"}
        if (method, path) == ("POST", "/channels/direct"):
            return self._direct(body)
        if (method, path) == ("POST", "/files"):
            for stored in files:
                self.files[stored.info["id"]] = stored
            return {"file_infos": [f.info for f in files], "client_ids": []}
        if method == "GET" and (match := re.fullmatch(r"/files/(\w+)", path)):
            served = self.files.get(match[1])
            if served is None:
                raise LookupError("file not found")
            self.file_gets.append(match[1])
            return web.Response(body=served.data, content_type=served.info["mime_type"])
        raise LookupError(f"no route {method} {path}")

    async def _read_upload(self, request: web.Request) -> list[StoredFile]:
        reader = await request.multipart()
        channel_id, found = "", []
        async for part in reader:
            if not isinstance(part, aiohttp.BodyPartReader):
                continue
            if part.name == "channel_id":
                channel_id = (await part.read()).decode()
            elif part.name == "files" and part.filename:
                data = await part.read()
                mime = part.headers.get("Content-Type") or mimetypes.guess_type(part.filename)[0]
                info = _file_info(
                    part.filename, len(data), mime or "application/octet-stream", BOT_ID
                )
                info["channel_id"] = channel_id
                found.append(StoredFile(info, bytes(data)))
        if not channel_id:
            raise ValueError("channel_id is required")
        return found

    async def _create_post(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ValueError("the body is not a post")
        channel_id = str(body.get("channel_id", ""))
        self._known_channel(channel_id)
        message = str(body.get("message", ""))
        if len(message) > MAX_POST:
            raise ValueError("the message is too long")
        root_id = str(body.get("root_id") or "")
        if root_id:
            root = self._known_post(root_id)
            if root["root_id"]:
                raise ValueError("root_id must be the thread's root post")
        file_ids = [str(f) for f in body.get("file_ids") or []]
        for file_id in file_ids:
            if file_id not in self.files:
                raise ValueError("unknown file id")
        if not message and not file_ids:
            raise ValueError("a post needs a message or files")
        post = self._store_post(
            BOT_ID, channel_id, message, root_id, file_ids, body.get("props") or {}
        )
        await self._broadcast_posted(post)
        return post

    async def _patch_post(self, post_id: str, body: Any) -> dict[str, Any]:
        post = self._known_post(post_id)
        if "message" in body:
            if len(body["message"]) > MAX_POST:
                raise ValueError("the message is too long")
            post["message"] = body["message"]
        if "props" in body:
            post["props"] = body["props"]
        post["edit_at"] = post["update_at"] = _now_ms()
        await self.broadcast("post_edited", {"post": json.dumps(post)}, post["channel_id"])
        return post

    def _direct(self, body: Any) -> dict[str, Any]:
        if not (isinstance(body, list) and len(body) == 2 and all(u in USERS for u in body)):
            raise ValueError("two known user ids are required")
        name = "__".join(sorted(body))
        for channel in self.channels.values():
            if channel["name"] == name:
                return channel
        channel = _channel(new_id(), "D", name, team="")
        self.channels[channel["id"]] = channel
        return channel

    def _store_post(
        self,
        user_id: str,
        channel_id: str,
        message: str,
        root_id: str,
        file_ids: list[str],
        props: dict[str, Any],
    ) -> dict[str, Any]:
        now = _now_ms()
        post: dict[str, Any] = {
            "id": new_id(),
            "create_at": now,
            "update_at": now,
            "edit_at": 0,
            "delete_at": 0,
            "is_pinned": False,
            "user_id": user_id,
            "channel_id": channel_id,
            "root_id": root_id,
            "original_id": "",
            "message": message,
            "type": "",
            "props": props,
            "hashtags": "",
            "file_ids": file_ids,
            "pending_post_id": "",
            "metadata": {},
        }
        if file_ids:
            post["metadata"]["files"] = [self.files[f].info for f in file_ids]
        self.posts[post["id"]] = post
        return post

    async def _broadcast_posted(self, post: dict[str, Any]) -> None:
        channel = self.channels[post["channel_id"]]
        data: dict[str, Any] = {
            "channel_display_name": channel["display_name"],
            "channel_name": channel["name"],
            "channel_type": channel["type"],
            "post": json.dumps(_sanitized(post)),
            "sender_name": "@" + USERS[post["user_id"]]["username"],
            "set_online": True,
            "team_id": channel["team_id"],
        }
        mentioned = [
            uid
            for uid, user in USERS.items()
            if re.search(rf"(?<![\w.-])@{user['username']}(?![\w-])", post["message"], re.I)
        ]
        if mentioned:
            data["mentions"] = json.dumps(mentioned)
        await self.broadcast("posted", data, post["channel_id"])

    def _known_channel(self, channel_id: str) -> dict[str, Any]:
        channel = self.channels.get(channel_id)
        if channel is None:
            raise LookupError("channel not found")
        return channel

    def _known_post(self, post_id: str) -> dict[str, Any]:
        post = self.posts.get(post_id)
        if post is None or post["delete_at"]:
            raise LookupError("post not found")
        return post

    # -- the WebSocket -----------------------------------------------------------------------

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            self.refused_sockets += 1
            return _error(401, "api.web_socket.connect.upgrade.app_error", "Invalid session")
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        session = self._resumable(request.query)
        if session is None:
            session = SocketSession(new_id())
            self._sessions[session.connection_id] = session
            missed: list[dict[str, Any]] = []
        else:
            self.resumed += 1
            after = int(request.query["sequence_number"])
            missed = [f for f in session.sent if f["seq"] >= after]
        session.ws = ws
        hello = session.frame(
            "hello",
            {"server_version": "10.11.0.fake", "connection_id": session.connection_id},
            {"omit_users": None, "user_id": BOT_ID, "channel_id": "", "team_id": ""},
        )
        await ws.send_str(json.dumps(hello))
        for missed_frame in missed:
            await ws.send_str(json.dumps(missed_frame))
        async with self._changed:
            self.connections += 1
            self._changed.notify_all()
        try:
            async for frame in ws:
                if frame.type is WSMsgType.TEXT:
                    action = json.loads(frame.data)
                    reply = {"status": "OK", "seq_reply": action.get("seq")}
                    await ws.send_str(json.dumps(reply))
        finally:
            if session.ws is ws:
                session.ws = None
        return ws

    def _resumable(self, query: Any) -> SocketSession | None:
        """The session a reconnecting client names, when its missed events are still queued."""
        session = self._sessions.get(query.get("connection_id", ""))
        sequence = query.get("sequence_number", "")
        if session is None or not sequence.isdigit() or session.ws is not None:
            return None
        oldest = session.sent[0]["seq"] if session.sent else session.next_seq
        return session if oldest <= int(sequence) <= session.next_seq else None


def _channel(channel_id: str, kind: str, name: str, *, team: str = TEAM_ID) -> dict[str, Any]:
    return {
        "id": channel_id,
        "type": kind,
        "name": name,
        "display_name": name,
        "team_id": team,
        "delete_at": 0,
    }


def _file_info(name: str, size: int, mime: str, user_id: str) -> dict[str, Any]:
    return {
        "id": new_id(),
        "user_id": user_id,
        "name": name,
        "extension": name.rsplit(".", 1)[-1] if "." in name else "",
        "size": size,
        "mime_type": mime,
        "create_at": _now_ms(),
    }


def _sanitized(post: dict[str, Any]) -> dict[str, Any]:
    """A post as clients see it: integration URLs and contexts stripped from its buttons."""
    copy: dict[str, Any] = json.loads(json.dumps(post))
    for attachment in copy["props"].get("attachments") or []:
        for action in attachment.get("actions") or []:
            action.pop("integration", None)
    return copy


def _now_ms() -> int:
    return int(time.time() * 1000)


def _error(
    status: int, error_id: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"id": error_id, "message": message, "status_code": status, "request_id": new_id()}
    return web.json_response(body, status=status, headers=headers)


async def _json_or_text(response: aiohttp.ClientResponse) -> Any:
    text = await response.text()
    try:
        return json.loads(text)
    except ValueError:
        return text
