"""The one client for OpenAI-compatible chat completions (OpenAI, OpenRouter, vLLM, Ollama,
llama.cpp): retries with backoff, streaming, and native or text tool calls behind one API.

Streaming failures: a stream that breaks or ends early is retried like any transient error
as long as no text has reached `on_text`; after that, retrying would repeat text the user
already saw, so it raises LLMBadResponse. A chunk that is not JSON is a server bug and is
not retried.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from gateway.config import ProviderSettings
from gateway.llm.errors import (
    LLMBadResponse,
    LLMRequestError,
    Redactor,
    mentions_tools,
)
from gateway.llm.formats import FormatName, prepare
from gateway.llm.responses import Responses, Retry, model_ids, stream_broken
from gateway.llm.retry import backoff_delay
from gateway.llm.stream import (
    SSEDecoder,
    StreamAccumulator,
    StreamErrorEvent,
    VisibleText,
    sse_lines,
)
from gateway.llm.transport import Answer, LLMTransport, StreamingAnswer, TransportError
from gateway.llm.types import Completion, Message, OnText
from gateway.llm.vision import Vision
from gateway.llm.wire import RawReply, to_completion
from gateway.runtime.unicode import valid_unicode

log = logging.getLogger(__name__)

_Finalize = Callable[[RawReply], Completion]


@dataclass(frozen=True)
class _Listeners:
    """Who hears a completion while it streams: the visible text, and the reasoning."""

    text: OnText | None = None
    reasoning: OnText | None = None


_ENDPOINT = "/chat/completions"
_ONE_BAD_TOOL = re.compile(r"tools\[\d+\]")
_JSON = {"Content-Type": "application/json"}
_SSE = {"Content-Type": "application/json", "Accept": "text/event-stream"}


class LLMClient:
    """Shared by every session; safe for concurrent use."""

    def __init__(self, settings: ProviderSettings) -> None:
        self._settings = settings
        api_key = settings.api_key.get_secret_value()
        extra = {name: value.get_secret_value() for name, value in settings.extra_headers.items()}
        headers = {"User-Agent": "chatgate", **extra}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # Header values may be credentials too (x-api-key and the like).
        self._redact = Redactor([api_key, *extra.values()])
        self._http = LLMTransport(
            settings.base_url,
            headers,
            max_connections=settings.max_connections,
            timeout=settings.timeout,
            connect_timeout=settings.connect_timeout,
        )
        # Built once: the completion call, the hot path, sends the same headers every time.
        self._post_headers = self._http.headers_with(_JSON)
        self._stream_headers = self._http.headers_with(_SSE)
        # Where the server is, without any credentials that may sit in the URL.
        self._where = str(URL(settings.base_url).with_user(None))
        self._responses = Responses(self._redact, settings.model, self._where, _ENDPOINT)
        self._text_fallback = False
        # Reused while the same schema dicts come back (ToolSpec.schema() caches them).
        self._tools_json: tuple[tuple[Any, ...], str] = ((), "")
        self._stream_usage = True  # cleared if the server refuses stream_options
        self._vision = Vision(settings)

    @property
    def format(self) -> Literal["native", "text"]:
        """The tool-call format in effect; "auto" switches to text once the server refuses tools."""
        if self._settings.tool_call_format == "text" or self._text_fallback:
            return "text"
        return "native"

    @property
    def settings(self) -> ProviderSettings:
        return self._settings

    @property
    def vision(self) -> Vision:
        """Whether the model takes images, and what it reads where it cannot see one."""
        return self._vision

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        stream: bool | None = None,
        max_tokens: int | None = None,
        on_text: OnText | None = None,
        on_reasoning: OnText | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """One chat completion. History in and the result out are always native-shaped.

        `on_text` receives the visible reply text as it streams (no reasoning, no tool-call
        markup); `on_reasoning` the reasoning (reasoning fields and `<think>` blocks);
        `temperature` overrides the provider's.
        Raises an LLMError subclass on failure. Image parts go to the model as
        `llm.vision` allows (gateway/llm/vision.py).
        """
        use_stream = self._settings.stream if stream is None else stream
        listeners = _Listeners(on_text, on_reasoning)

        async def send(prepared: list[Message]) -> Completion:
            return await self._complete_any_format(
                prepared, tools, tool_choice, use_stream, max_tokens, listeners, temperature
            )

        return await self._vision.complete(messages, send)

    async def _complete_any_format(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        use_stream: bool,
        max_tokens: int | None,
        listeners: _Listeners,
        temperature: float | None = None,
    ) -> Completion:
        """Native tool calls, or text ones once the server refused tools (tool_call_format auto)."""
        call = (messages, tools, tool_choice, use_stream, max_tokens, listeners, temperature)
        if self.format == "native":
            try:
                return await self._complete("native", *call)
            except LLMRequestError as exc:
                if not self._refuses_tools(exc, tools):
                    raise
                self._text_fallback = True
                log.warning(
                    "llm server refused native tools; using text tool calls from now on "
                    "model=%s detail=%s",
                    self._settings.model,
                    exc.detail,
                )
        return await self._complete("text", *call)

    async def check(self) -> str:
        """Probe the server for `chatgate doctor`: one line on success, an LLMError otherwise."""
        model = self._settings.model
        try:
            answer = await self._http.get("/models")
        except TransportError as exc:
            raise self._responses.transport_error(exc) from exc
        if answer.status in (401, 403):
            self._responses.raise_for_status(answer, "/models")
        models = model_ids(answer) if answer.ok else None
        if models is not None and model in models:
            return f"{self._where}: reachable, {len(models)} model(s), '{model}' available"
        # No usable model list (or the model is an alias not in it): a 1-token completion decides.
        await self.complete([{"role": "user", "content": "ping"}], stream=False, max_tokens=1)
        if models is None:
            return f"{self._where}: reachable, '{model}' answers (the server lists no models)"
        return f"{self._where}: reachable, '{model}' answers (not in its list of {len(models)})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- one completion, in either format ----------------------------------------------

    async def _complete(
        self,
        format_name: FormatName,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        stream: bool,
        max_tokens: int | None,
        listeners: _Listeners,
        temperature: float | None,
    ) -> Completion:
        call = prepare(
            format_name,
            messages,
            tools,
            tool_choice,
            lenient=self._settings.tool_call_format == "auto",
        )
        body = {**self._body(call.messages, stream, max_tokens, temperature), **call.body}

        def finalize(raw: RawReply) -> Completion:
            return to_completion(raw, text_calls=call.text_calls, names=call.names)

        return await self._send(body, stream, listeners, call.text_calls, finalize)

    def _refuses_tools(self, error: LLMRequestError, tools: list[dict[str, Any]] | None) -> bool:
        """Whether an "auto" client should switch to text tool calls for good."""
        if not tools or self._settings.tool_call_format != "auto":
            return False
        if error.status not in (400, 422) or not mentions_tools(error.detail):
            return False
        # "tools[3].function.name: invalid" is one bad tool schema, not a server without tools.
        return not _ONE_BAD_TOOL.search(error.detail)

    def _body(
        self,
        messages: list[Message],
        stream: bool,
        max_tokens: int | None,
        temperature: float | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._settings.model, "messages": messages}
        if temperature is None:
            temperature = self._settings.temperature
        if temperature is not None:
            body["temperature"] = temperature
        limit = max_tokens or self._settings.max_tokens
        if limit:
            body["max_tokens"] = limit
        if stream:
            body["stream"] = True
            if self._stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    def _encode(self, body: dict[str, Any]) -> bytes:
        """The request as JSON bytes. The tool schemas, often most of the request and the
        same list call after call, are serialised once and reused."""
        tools = body.get("tools")
        rest = {k: v for k, v in body.items() if k != "tools"}
        text = json.dumps(rest, ensure_ascii=False)
        if tools:
            cached, encoded = self._tools_json
            same = len(cached) == len(tools) and all(
                a is b for a, b in zip(cached, tools, strict=True)
            )
            if not same:
                # The cache holds the dicts themselves, so their identities stay unique.
                encoded = json.dumps(tools, ensure_ascii=False)
                self._tools_json = (tuple(tools), encoded)
            text = f'{text[:-1]}, "tools": {encoded}}}'
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates cannot be encoded; replacing them (with U+FFFD, as history
            # stores them) beats failing the turn.
            return valid_unicode(text).encode("utf-8")

    # --- sending, with retries ----------------------------------------------------------

    async def _send(
        self,
        body: dict[str, Any],
        stream: bool,
        listeners: _Listeners,
        hide_calls: bool,
        finalize: _Finalize,
    ) -> Completion:
        payload = self._encode(body)
        retries = self._settings.max_retries
        attempt = 0
        while True:
            try:
                if stream:
                    return await self._stream_once(payload, listeners, hide_calls, finalize)
                return finalize(await self._post_once(payload))
            except LLMRequestError as exc:
                # A few servers and proxies reject stream_options; usage is optional anyway.
                if "stream_options" not in body or "stream_options" not in exc.detail:
                    raise
                self._stream_usage = False
                body = {k: v for k, v in body.items() if k != "stream_options"}
                payload = self._encode(body)
            except Retry as retry:
                delay = self._delay(attempt, retry.retry_after)
                if attempt >= retries or delay is None:
                    raise retry.error from retry.__cause__
                attempt += 1
                log.warning(
                    "llm retry attempt=%d/%d delay=%.2fs error=%s",
                    attempt,
                    retries,
                    delay,
                    retry.error.detail,
                )
                await asyncio.sleep(delay)

    def _delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Seconds before the next attempt; None when the server asks for more than we'd wait."""
        settings = self._settings
        if retry_after is not None:
            return retry_after if retry_after <= settings.wait_cap else None
        return backoff_delay(attempt, settings.retry_base_delay, settings.retry_max_delay)

    async def _post_once(self, payload: bytes) -> RawReply:
        try:
            answer = await self._http.post(_ENDPOINT, payload, self._post_headers)
        except TransportError as exc:
            raise Retry(self._responses.transport_error(exc)) from exc
        if not answer.ok:
            self._responses.raise_for_status(answer, _ENDPOINT)
        return self._responses.reply(answer)

    async def _stream_once(
        self,
        payload: bytes,
        listeners: _Listeners,
        hide_calls: bool,
        finalize: _Finalize,
    ) -> Completion:
        try:
            answer = await self._http.stream(_ENDPOINT, payload, self._stream_headers)
        except TransportError as exc:
            raise Retry(self._responses.transport_error(exc)) from exc
        try:
            if not answer.ok:
                self._responses.raise_for_status(await self._read(answer), _ENDPOINT)
            if "text/event-stream" not in answer.headers.get("content-type", ""):
                # Some servers ignore stream=true and answer with one JSON document.
                completion = finalize(self._responses.reply(await self._read(answer)))
                if listeners.reasoning is not None and completion.reasoning:
                    await listeners.reasoning(completion.reasoning)
                if listeners.text is not None and completion.content:
                    await listeners.text(completion.content)
                return completion
            return await self._consume_stream(answer, listeners, hide_calls, finalize)
        finally:
            answer.release()

    async def _read(self, answer: StreamingAnswer) -> Answer:
        """The whole body of an answer that is not a stream; a break in it is retried."""
        try:
            return await answer.read()
        except TransportError as exc:
            stream_broken(self._responses.transport_error(exc), False, exc)

    async def _consume_stream(
        self,
        answer: StreamingAnswer,
        listeners: _Listeners,
        hide_calls: bool,
        finalize: _Finalize,
    ) -> Completion:
        on_text, on_reasoning = listeners.text, listeners.reasoning
        visible = VisibleText(hide_calls=hide_calls) if on_text is not None else None
        decoder = SSEDecoder()
        accumulator = StreamAccumulator()
        delivered = False
        lines = sse_lines(answer.chunks())

        async def take(item: Any) -> None:
            nonlocal delivered
            try:
                text = accumulator.feed(item)
            except StreamErrorEvent as event:
                self._responses.raise_error_event(event, delivered=delivered)
            shown, thought = "", accumulator.reasoning_delta
            if text and visible is not None:
                shown = visible.feed(text)
                thought += visible.take_thoughts()
            if thought and on_reasoning is not None:
                await on_reasoning(thought)
            if shown and on_text is not None:
                delivered = True
                await on_text(shown)

        while not accumulator.done:
            # Only the network read sits in the try: errors raised by on_text are the caller's.
            try:
                line = await anext(lines)
            except StopAsyncIteration:
                break
            except TransportError as exc:
                stream_broken(self._responses.transport_error(exc), delivered, exc)
            for item in decoder.feed_line(line):
                await take(item)
        for item in decoder.close():
            await take(item)
        if not accumulator.complete:
            stream_broken(
                LLMBadResponse("the stream ended before the reply was complete"), delivered, None
            )
        completion = finalize(accumulator.result())
        if visible is not None and on_text is not None:
            rest = visible.flush(completion.content)
            if rest:
                await on_text(rest)
        return completion
