"""A scripted OpenAI-compatible server for tests and benchmarks (aiohttp on 127.0.0.1).

Push `Reply`s to script the next answers; when the script is empty the responder answers
(by default it echoes the last user message). Every request body is kept in `requests`.

    async with ScriptedLLM() as llm:
        llm.push(Reply.call("get_weather", city="Paris"), Reply.text("Sunny."))
        settings = LLMSettings(base_url=llm.url, model="fake")
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.media import MediaEndpoints
from tests.fakes.server import LocalServer

ToolArgs = dict[str, Any] | str


@dataclass
class Reply:
    """One scripted answer. `tool_calls` holds (name, arguments as a dict or raw JSON text)."""

    content: str | None = None
    tool_calls: list[tuple[str, ToolArgs]] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None  # sent verbatim (malformed JSON, hand-written SSE)
    delay: float = 0.0  # seconds before answering
    usage: tuple[int, int] = (10, 5)  # (prompt_tokens, completion_tokens)
    reasoning: str | None = None  # sent as `reasoning_content`
    finish_reason: str | None = None  # default: "tool_calls" with calls, else "stop"
    # Streaming: the content goes out in `chunks` pieces (or exactly these `pieces`),
    # `chunk_delay` seconds apart, as a model writing tokens would.
    chunks: int = 3
    pieces: list[str] | None = None
    chunk_delay: float = 0.0
    gzip: bool = False  # a non-streaming body sent with Content-Encoding: gzip

    def __post_init__(self) -> None:
        if self.pieces is not None and self.content is None:
            self.content = "".join(self.pieces)

    @classmethod
    def streamed(cls, content: str, *, chunks: int, delay: float, **kwargs: Any) -> Reply:
        """Text that streams as `chunks` pieces `delay` seconds apart."""
        return cls(content=content, chunks=chunks, chunk_delay=delay, **kwargs)

    @classmethod
    def text(cls, content: str, **kwargs: Any) -> Reply:
        return cls(content=content, **kwargs)

    @classmethod
    def call(cls, name: str, **arguments: Any) -> Reply:
        return cls(tool_calls=[(name, arguments)])

    @classmethod
    def calls(cls, *calls: tuple[str, ToolArgs]) -> Reply:
        """Parallel tool calls: `Reply.calls(("a", {"x": 1}), ("b", {}))`."""
        return cls(tool_calls=list(calls))

    @classmethod
    def error(cls, status: int, message: str, **kwargs: Any) -> Reply:
        """An OpenAI-shaped error body: {"error": {"message": ...}}."""
        body = json.dumps({"error": {"message": message, "type": "error", "code": status}})
        return cls(status=status, raw_body=body, **kwargs)


def _encoded(reply: Reply, response: web.Response) -> web.Response:
    if reply.gzip:
        response.enable_compression(web.ContentCoding.gzip)
    return response


Responder = Callable[[dict[str, Any]], Reply | Awaitable[Reply]]


def last_user_text(request: dict[str, Any]) -> str:
    """Text of the last user message in a request body ("" if there is none)."""
    for message in reversed(request.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content or ""
    return ""


def tool_results(request: dict[str, Any]) -> list[str]:
    """Contents of the `tool` messages after the last assistant turn that called tools."""
    results: list[str] = []
    for message in reversed(request.get("messages", [])):
        if message.get("role") != "tool":
            break
        results.append(str(message.get("content", "")))
    return list(reversed(results))


def echo(request: dict[str, Any]) -> Reply:
    """The default responder: instant `echo: <last user text>`, good for benchmarks."""
    return Reply(content=f"echo: {last_user_text(request)}")


class ScriptedLLM(LocalServer):
    max_body = 32 * 1024 * 1024  # image parts and audio uploads

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        models: tuple[str, ...] = ("fake-model",),
        record: bool = True,
    ) -> None:
        super().__init__()
        # record=False (benchmarks): keep no request bodies, so a long run stays small and
        # the fake spends as little CPU as a remote model server would spend on this machine.
        self.record = record
        self.responder: Responder = responder or echo
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        # time.monotonic() at which each streamed reply wrote its first words (benchmarks).
        self.first_tokens: list[float] = []
        self._script: deque[Reply] = deque()
        self._ids = itertools.count(1)
        self._arrived = asyncio.Condition()
        # /audio/transcriptions, /audio/speech, /images/generations on the same server.
        self.media = MediaEndpoints()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: Reply) -> None:
        """Script the next answers, consumed in order by successive completion requests."""
        self._script.extend(replies)

    def reset(self, responder: Responder | None = None) -> None:
        """Forget the script and what was asked (a server shared by several tests)."""
        self._script.clear()
        self.requests.clear()
        self.request_headers.clear()
        self.responder = responder or echo

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        return len(self._script)

    def wait_for_requests(self, n: int, timeout: float = 5) -> Awaitable[list[dict[str, Any]]]:
        """Wait until at least `n` completion requests have arrived; returns them all."""
        return self._wait_for(n, timeout)

    async def _wait_for(self, n: int, seconds: float) -> list[dict[str, Any]]:
        async with asyncio.timeout(seconds), self._arrived:
            await self._arrived.wait_for(lambda: len(self.requests) >= n)
        return self.requests

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._models)
        self.media.routes(app, "/v1")

    # --- handlers ---------------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "owned_by": "fake"} for m in self.models]
        return web.json_response({"object": "list", "data": data})

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if self.record:
            self.request_headers.append(dict(request.headers))
            async with self._arrived:
                self.requests.append(body)
                self._arrived.notify_all()
        if self._script:
            reply = self._script.popleft()
        else:
            answer = self.responder(body)
            reply = await answer if inspect.isawaitable(answer) else answer
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.raw_body is not None or reply.status != 200:
            return _encoded(
                reply,
                web.Response(
                    status=reply.status,
                    text=reply.raw_body or "",
                    headers={"Content-Type": "application/json", **reply.headers},
                ),
            )
        model = body.get("model", "fake-model")
        calls = [self._wire_call(i, name, args) for i, (name, args) in enumerate(reply.tool_calls)]
        if body.get("stream"):
            return await self._stream(request, reply, calls, model)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if calls:
            message["tool_calls"] = calls
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        payload = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
            "usage": _usage(reply),
        }
        return _encoded(
            reply,
            web.Response(
                text=json.dumps(payload), content_type="application/json", headers=reply.headers
            ),
        )

    def _wire_call(self, index: int, name: str, args: ToolArgs) -> dict[str, Any]:
        arguments = args if isinstance(args, str) else json.dumps(args)
        return {
            "index": index,
            "id": f"call_{next(self._ids)}",
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }

    async def _stream(
        self, request: web.Request, reply: Reply, calls: list[dict[str, Any]], model: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        response.headers.update(reply.headers)
        await response.prepare(request)
        base = {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
        }

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            await response.write(_event({**base, "choices": [choice]}))

        await send({"role": "assistant", "content": ""})
        if reply.reasoning:
            for piece in _pieces(reply.reasoning):
                await send({"reasoning_content": piece})
        if reply.content:
            pieces = reply.pieces or _pieces(reply.content, reply.chunks)
            for number, piece in enumerate(pieces):
                if number and reply.chunk_delay:
                    await asyncio.sleep(reply.chunk_delay)
                elif not number:
                    self.first_tokens.append(time.monotonic())
                await send({"content": piece})
        for call in calls:
            function = call["function"]
            head = {**call, "function": {"name": function["name"], "arguments": ""}}
            await send({"tool_calls": [head]})
            for piece in _pieces(function["arguments"]):
                await send(
                    {"tool_calls": [{"index": call["index"], "function": {"arguments": piece}}]}
                )
        await send({}, _finish(reply))
        await response.write(_event({**base, "choices": [], "usage": _usage(reply)}))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _finish(reply: Reply) -> str:
    return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")


def _usage(reply: Reply) -> dict[str, int]:
    prompt, completion = reply.usage
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _pieces(text: str, parts: int = 3) -> list[str]:
    """Split text into a few chunks, as a server streaming tokens would."""
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)] or [text]


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


async def _serve_forever(delay: float, capacity: int) -> None:
    # At most `capacity` requests are answered at a time; the rest wait, as in a model
    # server whose batch is full.
    room = asyncio.Semaphore(capacity)

    async def respond(request: dict[str, Any]) -> Reply:
        async with room:
            await asyncio.sleep(delay)
        return Reply(content=f"echo: {last_user_text(request)}")

    server = ScriptedLLM(respond, record=False)
    await server.start()
    # Benchmarks read this line to find the server, which runs in its own process so
    # that its CPU use is not charged to the gateway being measured.
    print(server.url, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="serve an echoing fake LLM until killed")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--capacity", type=int, default=100_000, help="requests served at once")
    options = parser.parse_args()
    asyncio.run(_serve_forever(options.delay, options.capacity))
