"""The OpenAI-compatible endpoints: GET /v1/models and POST /v1/chat/completions.

A completion is one chat turn of the key's user (`api:<name>`): only the newest user message
of the request is taken, and the conversation (the `X-Chatgate-Session` header, else the
request's `user` field, else "default") keeps its history on the server, so a client that
sends only the new message still gets the agent's memory, tools and policies. Streaming
turns the successive states of the reply into `chat.completion.chunk` deltas.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from typing import Any

from aiohttp import web

from adapters.api.adapter import DEFAULT_CONVERSATION, ApiAdapter, RequestChat
from adapters.api.content import ContentError, UserMessage, newest_user_message
from adapters.api.replies import (
    LIVE_TTL,
    StreamText,
    TurnWatch,
    joined,
    take_unread,
    wait_until_idle,
)
from adapters.api.settings import ApiSettings
from gateway.sdk import (
    RATE_LIMITED,
    AdapterContext,
    Attachment,
    Inbound,
    SessionStore,
    Status,
    Submission,
    keys,
    parse_json,
)
from gateway.sdk.media import kind_of
from gateway.sdk.webkit import ChatMessage, gone, same

log = logging.getLogger(__name__)

SESSION_HEADER = "X-Chatgate-Session"
_CONVERSATION = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
EARLIER = "Earlier replies in this conversation:"
PENDING = (
    "This needs an operator's approval before I can go on. An operator decides in the console "
    "(/admin) or in chat; the outcome and my answer come with your next message here."
)
QUESTION_NOTE = "(Your next message here is taken as the answer.)"
TIMEOUT = "I am still working on this; the answer comes with your next message here."


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.code = code

    def response(self) -> web.Response:
        body = {
            "error": {"message": str(self), "type": self.kind, "param": None, "code": self.code}
        }
        return web.json_response(body, status=self.status)


class ApiSite:
    def __init__(self, adapter: ApiAdapter, settings: ApiSettings, ctx: AdapterContext) -> None:
        self._adapter = adapter
        self._settings = settings
        self._ctx = ctx
        self._store = ctx.store
        self._sessions = SessionStore(ctx.store)
        self._keys = [(key.get_secret_value(), name) for key, name in settings.keys.items()]

    def add_routes(self, http: Any) -> None:
        http.add_route("GET", "/v1/models", self._errors(self._models))
        http.add_route("POST", "/v1/chat/completions", self._errors(self._completions))

    def _errors(self, handler: Any) -> Any:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            try:
                with self._adapter.streams.track():
                    response: web.StreamResponse = await handler(request)
                return response
            except ApiError as exc:
                return exc.response()

        return wrapped

    def _user(self, request: web.Request) -> str:
        scheme, _, key = request.headers.get("Authorization", "").partition(" ")
        found = None
        for secret, name in self._keys:  # constant time: every key is compared
            if scheme.lower() == "bearer" and key and same(key.strip(), secret):
                found = name
        if found is None:
            log.warning("api request refused: bad key client=%s", request.remote)
            raise ApiError(
                401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key"
            )
        return found

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._user(request)
        models = [
            {"id": name, "object": "model", "created": 0, "owned_by": "chatgate"}
            for name in self._model_names()
        ]
        return web.json_response({"object": "list", "data": models})

    def _model_names(self) -> list[str]:
        return [self._settings.model, *self._settings.models]

    async def _keep_images(
        self, where: RequestChat, message: UserMessage
    ) -> tuple[Attachment, ...]:
        """Store the message's images for the turn, once the sender may use the bot."""
        if not message.images:
            return ()
        probe = Inbound(
            event_id="api:access", chat=where.chat, sender=where.person, text=message.text
        )
        if (reason := self._ctx.refusal(probe)) is not None:
            raise ApiError(403, reason, "permission_error", "refused")
        attachments = []
        for image in message.images:
            ref = await self._adapter.files.put(where.user, image.name, image.mime_type, image.data)
            attachments.append(
                Attachment(
                    kind=kind_of(image.mime_type),
                    file_id=ref.id,
                    name=ref.name,
                    size=ref.size,
                    mime_type=image.mime_type,
                )
            )
        return tuple(attachments)

    # -- completions ----------------------------------------------------------------------------

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        user = self._user(request)
        body = await _body(request, int(self._settings.max_request_mb * 1_000_000))
        options = body.get("stream_options") or {}
        if not isinstance(options, dict):
            raise ApiError(
                400,
                'stream_options must be an object, like {"include_usage": true}.',
                "invalid_request_error",
            )
        usage_wanted = bool(options.get("include_usage"))
        model = str(body.get("model"))
        try:
            profile = self._settings.profile_of(model)
        except KeyError:
            served = ", ".join(repr(m) for m in self._model_names())
            raise ApiError(
                404,
                f"The model {model!r} does not exist here; this gateway serves {served} "
                "(GET /v1/models).",
                "invalid_request_error",
                "model_not_found",
            ) from None
        try:
            message = newest_user_message(body.get("messages"))
        except ContentError as exc:
            raise ApiError(400, str(exc), "invalid_request_error") from None
        conversation = _conversation(request.headers.get(SESSION_HEADER) or body.get("user"))
        where = RequestChat(user, conversation, uuid.uuid4().hex[:24])
        attachments = await self._keep_images(where, message)
        stream = bool(body.get("stream"))
        before = await self._sessions.load(where.session)
        await self._store.set(keys.api_live(where.request_id), "1", ttl=LIVE_TTL)
        self._adapter.waiting += 1
        reply: _Reply | None = None
        try:
            earlier = await take_unread(self._adapter, self._store, where)
            inbound = Inbound(
                event_id=f"api:{where.request_id}",
                chat=where.chat,
                sender=where.person,
                text=message.text,
                message_id=where.request_id,
                mentioned=True,
                attachments=attachments,
                session=str(where.session),
                profile=profile,
            )
            submission = await self._ctx.submit(inbound)
            _refusal(submission)
            reply = _Reply(model, where, earlier, stream)
            if stream:
                await reply.open(request, conversation)
            ended = await self._follow(submission, where, reply, request)
            if ended == "gone":  # nobody to answer: it all stays unread for the next reply
                answer, reply = reply, None
                return answer.abandoned()
            earlier_now = await take_unread(self._adapter, self._store, where)
            await reply.finish(ended, earlier_now)
            after = await self._sessions.load(where.session)
            usage = {
                "prompt_tokens": after.prompt_tokens - before.prompt_tokens,
                "completion_tokens": after.completion_tokens - before.completion_tokens,
            }
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            if stream:
                return await reply.close(usage if usage_wanted else None)
            return reply.completion(usage, conversation)
        finally:
            self._adapter.waiting -= 1
            await self._let_go(where, reply)

    async def _follow(
        self, submission: Submission, where: RequestChat, reply: _Reply, request: web.Request
    ) -> str:
        """Wait for what the submission started; returns how the wait ended."""
        if submission.status is Status.COMMAND:
            for message in await self._adapter.messages.all(where.chat.address):
                await reply.seen(message)
            return "done"
        if submission.status is Status.ANSWERED:
            # The answer to a question: the reply is the rest of the turn that asked it.
            idle = await wait_until_idle(self._store, where, self._settings.timeout_seconds)
            return "done" if idle else "timeout"
        watch = TurnWatch(
            adapter=self._adapter,
            store=self._store,
            where=where,
            event_id=f"api:{where.request_id}",
            done=submission.done,
            seen=reply.seen,
            approval_wait=self._settings.approval_wait,
            timeout=self._settings.timeout_seconds,
            client_gone=lambda: gone(request),
        )
        return await watch.wait()

    async def _let_go(self, where: RequestChat, reply: _Reply | None) -> None:
        """No client waits for this request any more: what its turn sends from now on is kept
        unread for the conversation's next reply, and so is anything it sent that this
        response did not show (it may have come just as the response ended)."""
        await self._store.delete(keys.api_live(where.request_id))
        unread = keys.api_open(where.session)
        for message in await self._adapter.messages.all(where.chat.address):
            if reply is None or not reply.showed(message):
                await self._store.hset(unread, message.id, where.request_id)


class _Reply:
    """The response being built: whole at the end, or streamed chunk by chunk."""

    def __init__(
        self, model: str, where: RequestChat, earlier: list[ChatMessage], stream: bool
    ) -> None:
        self._model = model
        self._id = f"chatcmpl-{where.request_id}"
        self._created = int(time.time())
        self._stream = stream
        self._text = StreamText()
        self._earlier = joined(earlier)
        self._response: web.StreamResponse | None = None
        self._sent_earlier = False
        self._content = ""
        self._tail = ""

    async def open(self, request: web.Request, conversation: str) -> None:
        self._response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
                SESSION_HEADER: conversation,
            }
        )
        await self._response.prepare(request)
        await self._chunk({"role": "assistant", "content": ""})
        if self._earlier:
            await self._chunk({"content": f"{EARLIER}\n\n{self._earlier}\n\n---\n\n"})
            self._sent_earlier = True

    def showed(self, message: ChatMessage) -> bool:
        return self._text.showed(message)

    def abandoned(self) -> web.StreamResponse:
        """The response to a client that went away: nothing more is written to it."""
        return self._response or web.Response(status=499)

    async def seen(self, message: ChatMessage) -> None:
        delta = self._text.feed(message)
        if delta and self._response is not None:
            await self._chunk({"content": delta})

    async def finish(self, ended: str, earlier_now: list[ChatMessage]) -> None:
        notes = {"approval": PENDING, "question": QUESTION_NOTE, "timeout": TIMEOUT}
        tail = []
        if ended in notes:
            tail.append(notes[ended])
        if earlier_now:
            tail.append(f"{EARLIER}\n\n{joined(earlier_now)}")
        self._tail = "\n\n".join(tail)
        if self._response is not None and self._tail:
            await self._chunk({"content": ("\n\n" if self._text.text else "") + self._tail})

    async def close(self, usage: dict[str, int] | None) -> web.StreamResponse:
        assert self._response is not None
        await self._chunk({}, finish="stop")
        if usage is not None:
            await self._write({**self._base(), "choices": [], "usage": usage})
        await self._response.write(b"data: [DONE]\n\n")
        await self._response.write_eof()
        return self._response

    def completion(self, usage: dict[str, int], conversation: str) -> web.Response:
        parts = []
        if self._earlier:
            parts.append(f"{EARLIER}\n\n{self._earlier}\n\n---")
        if self._text.text:
            parts.append(self._text.text)
        if self._tail:
            parts.append(self._tail)
        body = {
            **self._base(),
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "\n\n".join(parts)},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }
        return web.json_response(body, headers={SESSION_HEADER: conversation})

    def _base(self) -> dict[str, Any]:
        return {
            "id": self._id,
            "object": "chat.completion.chunk",
            "created": self._created,
            "model": self._model,
        }

    async def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        await self._write({**self._base(), "choices": [choice]})

    async def _write(self, payload: dict[str, Any]) -> None:
        assert self._response is not None
        await self._response.write(b"data: " + json.dumps(payload).encode() + b"\n\n")


async def _body(request: web.Request, max_bytes: int) -> dict[str, Any]:
    # Read here, not with request.json(): images make bodies larger than the server's
    # default limit for other routes.
    if (request.content_length or 0) > max_bytes:
        raise _too_large(max_bytes)
    raw = bytearray()
    async for chunk in request.content.iter_chunked(65536):
        raw += chunk
        if len(raw) > max_bytes:
            raise _too_large(max_bytes)
    try:
        body = parse_json(bytes(raw))
    except ValueError as exc:  # not UTF-8, not JSON, or nested deeper than any request
        raise ApiError(
            400, f"The body is not valid JSON: {exc}.", "invalid_request_error"
        ) from None
    if not isinstance(body, dict):
        raise ApiError(400, "The body must be a JSON object.", "invalid_request_error")
    return body


def _too_large(max_bytes: int) -> ApiError:
    return ApiError(
        413,
        f"The request is larger than {max_bytes / 1_000_000:g} MB (api.max_request_mb).",
        "invalid_request_error",
    )


def _conversation(raw: Any) -> str:
    """The conversation a request belongs to; names that are not plain become a digest."""
    if not isinstance(raw, str) or not raw.strip():
        return DEFAULT_CONVERSATION
    name = raw.strip()
    if _CONVERSATION.match(name):
        return name
    return "h" + hashlib.sha256(name.encode()).hexdigest()[:20]


def _refusal(submission: Submission) -> None:
    """An HTTP error for a message the gateway did not take."""
    if submission.status is Status.REFUSED:
        outcome = submission.done.result() if submission.done.done() else None
        reason = (outcome.error if outcome else None) or "refused"
        if reason == RATE_LIMITED:
            raise ApiError(429, reason, "rate_limit_exceeded", "rate_limit_exceeded")
        raise ApiError(403, reason, "permission_error", "refused")
    if submission.status is Status.UNAVAILABLE:
        raise ApiError(
            503, "The gateway's store is unreachable; try again shortly.", "server_error"
        )
