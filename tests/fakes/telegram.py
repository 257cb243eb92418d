"""A fake Telegram Bot API for tests and benchmarks (aiohttp on 127.0.0.1, port 0).

It speaks the wire format python-telegram-bot uses (form-encoded requests, `{"ok": ...}`
replies), long-polls `getUpdates` with Telegram's offset semantics, validates HTML the way
Telegram does (unknown tags, bad nesting and stray `<` are "can't parse entities"), and
records every call. Tests push updates with `push_message` / `push_press` and script
failures with `fail(...)`.

    async with FakeBotAPI() as tg:
        settings = {"telegram": {"token": tg.token, "api_url": tg.url}}
        tg.push_message("hi")
        [reply] = await tg.wait_sent(1)
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from PIL import Image

from tests.fakes.server import LocalServer

Params = dict[str, Any]

BOT_ID = 123456
BOT_USERNAME = "gw_bot"
TOKEN = f"{BOT_ID}:TEST-token-abcdefghijklmnop"
TEXT_LIMIT = 4096
CAPTION_LIMIT = 1024
# The Bot API's upload methods and the message field each fills.
_UPLOADS = {"sendPhoto": "photo", "sendDocument": "document", "sendVoice": "voice",
            "sendAudio": "audio"}  # fmt: skip
_JSON_PARAMS = {"reply_markup", "commands", "allowed_updates", "reply_parameters", "entities"}
_INT_PARAMS = {
    "chat_id",
    "message_id",
    "message_thread_id",
    "offset",
    "limit",
    "user_id",
    "draft_id",
}


@dataclass
class Call:
    method: str
    params: Params
    at: float
    peer: tuple[str, int] | None = None
    status: int = 0
    result: Any = None  # what the fake answered (a Message for sendMessage)
    returned: tuple[int, ...] = ()  # getUpdates: the update ids handed out

    @property
    def text(self) -> str:
        return str(self.params.get("text", ""))


@dataclass
class Fault:
    method: str
    status: int
    description: str
    retry_after: int | None
    times: int
    when: Callable[[Params], bool] | None
    migrate_to: int | None = None


@dataclass
class _Poll:
    request: web.Request
    conflicted: bool = False


@dataclass
class Upload:
    """A file the bot sent (sendPhoto, sendDocument, sendVoice, sendAudio)."""

    method: str
    chat_id: int
    filename: str
    content_type: str
    data: bytes
    caption: str | None
    params: Params


class EntityError(ValueError):
    """What Telegram says about HTML it cannot parse."""


@dataclass
class FakeBotAPI(LocalServer):
    token: str = TOKEN
    bot_id: int = BOT_ID
    username: str = BOT_USERNAME
    calls: list[Call] = field(default_factory=list)  # every call except getUpdates
    polls: list[Call] = field(default_factory=list)  # getUpdates calls
    # Updates not yet confirmed by a getUpdates offset, oldest first.
    pending: list[dict[str, Any]] = field(default_factory=list)
    messages: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    commands: list[dict[str, Any]] = field(default_factory=list)
    webhook: Params | None = None
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    conflicts: int = 0  # getUpdates calls that overlapped a live one (409 on a real server)
    pushed: dict[int, dict[str, Any]] = field(default_factory=dict)  # every update, by id
    pushed_at: dict[int, float] = field(default_factory=dict)
    listeners: list[Callable[[Call], None]] = field(default_factory=list)
    uploads: list[Upload] = field(default_factory=list)
    # sendMessageDraft (Bot API 9.3): the text each (chat, draft id) shows now. False: the
    # server is older and has no such method (404, as the real Bot API answers).
    drafts_supported: bool = True
    drafts: dict[tuple[int, int], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__()
        self._faults: list[Fault] = []
        self._stalls: list[list[Any]] = []  # [method, seconds, times left]
        self._update_ids = itertools.count(1)
        self._message_ids: dict[int, itertools.count[int]] = {}
        self._changed = asyncio.Condition()
        self._polls: list[_Poll] = []

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def me(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Gateway",
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": True,
            "supports_inline_queries": False,
        }

    max_body = 10 * 1024 * 1024

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)

    # -- scripting ----------------------------------------------------------------------

    def push_update(self, update: dict[str, Any]) -> int:
        """Queue an update for getUpdates; `update_id` is assigned unless given (redelivery)."""
        if "update_id" not in update:
            update = {"update_id": next(self._update_ids), **update}
        self.pending.append(update)
        self.pending.sort(key=lambda u: u["update_id"])
        self.pushed.setdefault(update["update_id"], update)
        self.pushed_at.setdefault(update["update_id"], time.monotonic())
        self._notify()
        return int(update["update_id"])

    def message(
        self,
        text: str | None = None,
        *,
        chat_id: int = 42,
        user_id: int = 42,
        first_name: str = "Alice",
        username: str | None = "alice",
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to: dict[str, Any] | None = None,
        entities: list[dict[str, Any]] | None = None,
        is_bot: bool = False,
        caption: str | None = None,
        photo: list[dict[str, Any]] | None = None,
        document: dict[str, Any] | None = None,
        **media: dict[str, Any],
    ) -> dict[str, Any]:
        """A Message from a person, stored so that the bot can reply to it or quote it."""
        sender: dict[str, Any] = {"id": user_id, "is_bot": is_bot, "first_name": first_name}
        if username:
            sender["username"] = username
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = "Team"
            chat["is_forum"] = thread_id is not None
        msg: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
        }
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        if text is not None:
            msg["text"] = text
            msg["entities"] = entities if entities is not None else auto_entities(text)
        if caption is not None:
            msg["caption"] = caption
            msg["caption_entities"] = auto_entities(caption)
        if photo is not None:
            msg["photo"] = photo
        if document is not None:
            msg["document"] = document
        for name, value in media.items():  # voice, audio, video, video_note
            msg[name] = value
        self.messages[(chat_id, msg["message_id"])] = msg
        return msg

    def push_message(self, text: str | None = None, **kwargs: Any) -> int:
        """Push a new message (see `message()` for the arguments); returns its update_id."""
        return self.push_update({"message": self.message(text, **kwargs)})

    def push_press(
        self, data: str, on: dict[str, Any], *, user_id: int = 42, first_name: str = "Alice"
    ) -> int:
        """Push a click on an inline button of the bot's message `on`."""
        query = {
            "id": f"cbq-{next(self._update_ids)}",
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "chat_instance": "ci-1",
            "data": data,
            "message": on,
        }
        return self.push_update({"callback_query": query})

    def add_file(self, file_id: str, content: bytes, *, path: str | None = None) -> None:
        self.files[file_id] = (path or f"documents/{file_id}.bin", content)

    def voice(self, file_id: str, content: bytes, *, duration: int = 3) -> dict[str, Any]:
        """A voice note's Voice object, its bytes served by getFile."""
        self.add_file(file_id, content, path=f"voice/{file_id}.oga")
        return {"file_id": file_id, "file_unique_id": f"u-{file_id}", "duration": duration,
                "mime_type": "audio/ogg", "file_size": len(content)}  # fmt: skip

    def uploads_of(self, method: str) -> list[Upload]:
        return [u for u in self.uploads if u.method == method]

    def stall(self, method: str, seconds: float, *, times: int = 1) -> None:
        """Carry out the next `times` calls of `method`, then answer each only after
        `seconds`: Telegram delivered the message, its answer came late."""
        self._stalls.append([method, seconds, times])

    def fail(
        self,
        method: str,
        status: int,
        description: str,
        *,
        retry_after: int | None = None,
        times: int = 1,
        when: Callable[[Params], bool] | None = None,
        migrate_to: int | None = None,
    ) -> None:
        """Answer the next `times` calls of `method` (matching `when`) with an error."""
        self._faults.append(
            Fault(method, status, description, retry_after, times, when, migrate_to)
        )

    # -- reading what happened ----------------------------------------------------------

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def sent(self, chat_id: int | None = None) -> list[Call]:
        """sendMessage calls that succeeded, optionally for one chat."""
        return [
            c
            for c in self.calls_of("sendMessage")
            if c.status == 200 and (chat_id is None or c.params["chat_id"] == chat_id)
        ]

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [c.text for c in self.sent(chat_id)]

    async def wait_for(self, predicate: Callable[[], bool], within: float = 5.0) -> None:
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(predicate)

    async def wait_sent(
        self, n: int, chat_id: int | None = None, within: float = 5.0
    ) -> list[Call]:
        """Wait until at least `n` messages were sent (to `chat_id`); returns them all."""
        await self.wait_for(lambda: len(self.sent(chat_id)) >= n, within)
        return self.sent(chat_id)

    async def wait_calls(self, method: str, n: int, within: float = 5.0) -> list[Call]:
        await self.wait_for(lambda: len(self.calls_of(method)) >= n, within)
        return self.calls_of(method)

    # -- the API ------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params = await _params(request)
        peer = request.transport.get_extra_info("peername") if request.transport else None
        call = Call(method, params, time.monotonic(), tuple(peer[:2]) if peer else None)
        response = self._fault(method, params)
        if response is None:
            handler = getattr(self, f"_m_{method}", None)
            if handler is None:
                response = _error(404, "Not Found")
            else:
                try:
                    call.result = await handler(request, params)
                    response = _ok(call.result)
                except _ApiError as exc:
                    response = _error(exc.status, exc.description)
        call.status = response.status
        if method == "getUpdates":
            call.returned = tuple(params.get("_returned", ()))
            self.polls.append(call)
        else:
            self.calls.append(call)
        for listener in self.listeners:
            listener(call)
        self._notify()
        for stall in self._stalls:
            if stall[0] == method and stall[2] > 0:
                stall[2] -= 1
                await asyncio.sleep(stall[1])
                break
        return response

    def _fault(self, method: str, params: Params) -> web.Response | None:
        for fault in self._faults:
            if (
                fault.method == method
                and fault.times > 0
                and (fault.when is None or fault.when(params))
            ):
                fault.times -= 1
                return _error(fault.status, fault.description, fault.retry_after, fault.migrate_to)
        return None

    async def _m_getMe(self, request: web.Request, params: Params) -> Any:
        return self.me

    async def _m_getUpdates(self, request: web.Request, params: Params) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        limit = int(params.get("limit") or 100)
        if offset:
            # Telegram forgets updates once a later offset confirms them.
            self.pending = [u for u in self.pending if u["update_id"] >= offset]
        if any(_alive(other.request) for other in self._polls):
            await asyncio.sleep(0.05)  # a client that just went away may not be noticed yet
        for other in self._polls:
            if _alive(other.request):
                self.conflicts += 1
                other.conflicted = True
        poll = _Poll(request)
        self._polls.append(poll)
        deadline = time.monotonic() + timeout
        try:
            while True:
                ready = [u for u in self.pending if u["update_id"] >= offset][:limit]
                left = deadline - time.monotonic()
                if ready or left <= 0 or poll.conflicted or not _alive(request):
                    break
                async with self._changed:
                    # Wake up now and then to notice a client that went away.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), min(left, 0.2))
        finally:
            self._polls.remove(poll)
        if poll.conflicted:
            raise _ApiError(409, "Conflict: terminated by other getUpdates request")
        params["_returned"] = [u["update_id"] for u in ready]
        return ready

    async def _m_sendMessage(self, request: web.Request, params: Params) -> Any:
        chat_id = _need(params, "chat_id")
        text = str(_need(params, "text"))
        _check_text(text, params.get("parse_mode"))
        markup = params.get("reply_markup")
        _check_markup(markup)
        msg: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": self.me,
            "text": text,
        }
        if params.get("message_thread_id"):
            msg["message_thread_id"] = params["message_thread_id"]
            msg["is_topic_message"] = True
        if markup:
            msg["reply_markup"] = markup
        self.messages[(chat_id, msg["message_id"])] = msg
        return msg

    async def _upload(self, method: str, params: Params) -> Any:
        chat_id = _need(params, "chat_id")
        field_name = _UPLOADS[method]
        upload = params.get(field_name)
        if not isinstance(upload, web.FileField):
            raise _ApiError(400, f"Bad Request: there is no {field_name} in the request")
        data = upload.file.read()
        caption = params.get("caption")
        if caption is not None:
            visible = str(caption)
            if params.get("parse_mode") == "HTML":
                try:
                    visible = parse_html(visible)
                except EntityError as exc:
                    raise _ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
            if utf16_len(visible) > CAPTION_LIMIT:
                raise _ApiError(400, "Bad Request: message caption is too long")
        file_id = f"sent-{len(self.uploads) + 1}"
        unique = f"u-{file_id}"
        self.files[file_id] = (f"sent/{file_id}", data)
        if field_name == "photo":
            try:
                with Image.open(io.BytesIO(data)) as image:
                    width, height = image.size
            except Exception:
                raise _ApiError(400, "Bad Request: IMAGE_PROCESS_FAILED") from None
            item: Any = [{"file_id": file_id, "file_unique_id": unique, "width": width,
                          "height": height, "file_size": len(data)}]  # fmt: skip
        elif field_name == "document":
            item = {"file_id": file_id, "file_unique_id": unique, "file_name": upload.filename,
                    "mime_type": upload.content_type, "file_size": len(data)}  # fmt: skip
        else:
            item = {"file_id": file_id, "file_unique_id": unique, "duration": 1,
                    "mime_type": upload.content_type, "file_size": len(data)}  # fmt: skip
        self.uploads.append(
            Upload(method, chat_id, upload.filename, upload.content_type, data, caption, params)
        )
        msg: dict[str, Any] = {
            "message_id": self._next_message_id(chat_id),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"},
            "from": self.me,
            field_name: item,
        }
        if caption is not None:
            msg["caption"] = caption
        self.messages[(chat_id, msg["message_id"])] = msg
        return msg

    async def _m_sendPhoto(self, request: web.Request, params: Params) -> Any:
        return await self._upload("sendPhoto", params)

    async def _m_sendDocument(self, request: web.Request, params: Params) -> Any:
        return await self._upload("sendDocument", params)

    async def _m_sendVoice(self, request: web.Request, params: Params) -> Any:
        return await self._upload("sendVoice", params)

    async def _m_sendAudio(self, request: web.Request, params: Params) -> Any:
        return await self._upload("sendAudio", params)

    async def _m_editMessageText(self, request: web.Request, params: Params) -> Any:
        key = (_need(params, "chat_id"), _need(params, "message_id"))
        msg = self.messages.get(key)
        if msg is None or msg["from"].get("id") != self.bot_id or msg.get("deleted"):
            raise _ApiError(400, "Bad Request: message to edit not found")
        text = str(_need(params, "text"))
        _check_text(text, params.get("parse_mode"))
        markup = params.get("reply_markup")
        _check_markup(markup)
        if msg.get("text") == text and msg.get("reply_markup") == markup:
            raise _ApiError(400, "Bad Request: message is not modified")
        msg["text"] = text
        msg.pop("reply_markup", None)
        if markup:
            msg["reply_markup"] = markup
        return msg

    async def _m_sendMessageDraft(self, request: web.Request, params: Params) -> Any:
        if not self.drafts_supported:
            raise _ApiError(404, "Not Found: method not found")
        chat_id = _need(params, "chat_id")
        draft_id = _need(params, "draft_id")
        if chat_id < 0:
            raise _ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        text = str(params.get("text") or "")
        if text:  # empty text shows a "Thinking..." placeholder
            _check_text(text, params.get("parse_mode"))
        self.drafts[(chat_id, draft_id)] = text
        return True

    async def _m_deleteMessage(self, request: web.Request, params: Params) -> Any:
        key = (_need(params, "chat_id"), _need(params, "message_id"))
        msg = self.messages.get(key)
        if msg is None or msg.get("deleted"):
            raise _ApiError(400, "Bad Request: message to delete not found")
        msg["deleted"] = True
        return True

    def delete(self, chat_id: int, message_id: int) -> None:
        """As if a person deleted the bot's message: later edits of it fail."""
        self.messages[(chat_id, message_id)]["deleted"] = True

    def shown(self, chat_id: int, message_id: int) -> str | None:
        """The text a message shows now (after edits); None once it was deleted."""
        msg = self.messages.get((chat_id, message_id))
        return None if msg is None or msg.get("deleted") else str(msg.get("text", ""))

    async def _m_sendChatAction(self, request: web.Request, params: Params) -> Any:
        _need(params, "chat_id")
        _need(params, "action")
        return True

    async def _m_setMessageReaction(self, request: web.Request, params: Params) -> Any:
        _need(params, "chat_id")
        _need(params, "message_id")
        return True

    async def _m_answerCallbackQuery(self, request: web.Request, params: Params) -> Any:
        _need(params, "callback_query_id")
        if len(str(params.get("text", ""))) > 200:
            raise _ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        return True

    async def _m_setMyCommands(self, request: web.Request, params: Params) -> Any:
        commands = _need(params, "commands")
        for command in commands:
            if not re.fullmatch(r"[a-z0-9_]{1,32}", command["command"]):
                raise _ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self.commands = commands
        return True

    async def _m_getMyCommands(self, request: web.Request, params: Params) -> Any:
        return self.commands

    async def _m_setWebhook(self, request: web.Request, params: Params) -> Any:
        self.webhook = {k: v for k, v in params.items() if not k.startswith("_")}
        return True

    async def _m_deleteWebhook(self, request: web.Request, params: Params) -> Any:
        self.webhook = None
        if str(params.get("drop_pending_updates")) == "true":
            self.pending.clear()
        return True

    async def _m_getFile(self, request: web.Request, params: Params) -> Any:
        file_id = str(_need(params, "file_id"))
        if file_id not in self.files:
            raise _ApiError(400, "Bad Request: invalid file_id")
        path, content = self.files[file_id]
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": len(content),
            "file_path": path,
        }

    async def _file(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        path = request.match_info["path"]
        for stored_path, content in self.files.values():
            if stored_path == path:
                return web.Response(body=content, content_type="application/octet-stream")
        return web.Response(status=404)

    # -- helpers ------------------------------------------------------------------------

    def _next_message_id(self, chat_id: int) -> int:
        # One sequence per chat, shared by people and the bot, as on Telegram.
        counter = self._message_ids.setdefault(chat_id, itertools.count(1))
        return next(counter)

    def _notify(self) -> None:
        asyncio.get_running_loop().create_task(self._notify_all())

    async def _notify_all(self) -> None:
        async with self._changed:
            self._changed.notify_all()


class _ApiError(Exception):
    def __init__(self, status: int, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.description = description


def _ok(result: Any) -> web.Response:
    return web.Response(
        text=json.dumps({"ok": True, "result": result}), content_type="application/json"
    )


def _error(
    status: int, description: str, retry_after: int | None = None, migrate_to: int | None = None
) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    if migrate_to is not None:
        body["parameters"] = {"migrate_to_chat_id": migrate_to}
    return web.Response(status=status, text=json.dumps(body), content_type="application/json")


async def _params(request: web.Request) -> Params:
    if request.content_type == "application/json":
        raw: dict[str, Any] = await request.json()
    elif request.method == "POST":
        raw = dict(await request.post())
    else:
        raw = dict(request.query)
    params: Params = {}
    for key, value in raw.items():
        if key in _JSON_PARAMS and isinstance(value, str):
            value = json.loads(value)
        elif key in _INT_PARAMS and isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        params[key] = value
    return params


def _need(params: Params, name: str) -> Any:
    if params.get(name) in (None, ""):
        raise _ApiError(400, f"Bad Request: {name} is empty")
    return params[name]


def _alive(request: web.Request) -> bool:
    transport = request.transport
    return transport is not None and not transport.is_closing()


def _check_text(text: str, parse_mode: str | None) -> None:
    visible = text
    if parse_mode == "HTML":
        try:
            visible = parse_html(text)
        except EntityError as exc:
            raise _ApiError(400, f"Bad Request: can't parse entities: {exc}") from None
    if not visible.strip():
        raise _ApiError(400, "Bad Request: message text is empty")
    if utf16_len(visible) > TEXT_LIMIT:
        raise _ApiError(400, "Bad Request: message is too long")


def _check_markup(markup: Any) -> None:
    if not markup:
        return
    for row in markup.get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(data.encode()) <= 64:
                raise _ApiError(400, "Bad Request: BUTTON_DATA_INVALID")


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


# Telegram's HTML: these tags only, properly nested, every other <, > and & escaped.
_TAGS = {
    "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a",
    "code", "pre", "blockquote", "tg-emoji",
}  # fmt: skip
_TOKEN = re.compile(
    r"<(/?)([a-zA-Z][\w-]*)((?:\s+[\w-]+(?:=\"[^\"<>]*\")?)*)\s*>|&(#\d+|#x[\da-fA-F]+|lt|gt|amp|quot);|[<>&]"
)
_ENTITY_TEXT = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


def parse_html(text: str) -> str:
    """The visible text of Telegram HTML; raises EntityError where Telegram would refuse it."""
    stack: list[str] = []
    visible: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        visible.append(text[pos : match.start()])
        pos = match.end()
        closing, tag, attrs, entity = match.group(1), match.group(2), match.group(3), match.group(4)
        if entity is not None:
            visible.append(_ENTITY_TEXT.get(entity, "?"))
        elif tag is None:
            raise EntityError(f"unexpected {match.group(0)!r} at offset {match.start()}")
        elif tag.lower() not in _TAGS:
            raise EntityError(f'unsupported start tag "{tag}" at offset {match.start()}')
        elif closing:
            if not stack or stack[-1] != tag.lower():
                raise EntityError(f'can\'t find end tag corresponding to start tag "{tag}"')
            stack.pop()
        else:
            _check_nesting(tag.lower(), attrs, stack)
            stack.append(tag.lower())
    visible.append(text[pos:])
    if stack:
        raise EntityError(f'can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(visible)


_FORMATTING = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "tg-spoiler",
    "span",
    "a",
}


def _check_nesting(tag: str, attrs: str, stack: list[str]) -> None:
    if "code" in stack:
        raise EntityError(f'tag "{tag}" inside a code entity')
    if "pre" in stack and not (tag == "code" and stack[-1] == "pre"):
        raise EntityError(f'tag "{tag}" inside a pre entity')
    if tag in ("code", "pre") and any(t in _FORMATTING for t in stack):
        raise EntityError(f'"{tag}" inside another entity')
    if tag == "a" and ("a" in stack or 'href="' not in attrs):
        raise EntityError("bad link")
    if tag == "blockquote" and "blockquote" in stack:
        raise EntityError("nested blockquote")


def auto_entities(text: str) -> list[dict[str, Any]]:
    """The entities Telegram would attach: a leading bot_command and @mentions (UTF-16 offsets)."""
    entities: list[dict[str, Any]] = []
    command = re.match(r"/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?", text)
    if command:
        entities.append({"type": "bot_command", "offset": 0, "length": command.end()})
    for mention in re.finditer(r"(?<![\w@/])@[A-Za-z0-9_]{3,32}", text):
        offset = utf16_len(text[: mention.start()])
        entities.append(
            {"type": "mention", "offset": offset, "length": utf16_len(mention.group(0))}
        )
    return entities
