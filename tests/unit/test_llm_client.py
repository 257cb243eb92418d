"""LLMClient against the scripted OpenAI-compatible server over real HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from pydantic import SecretStr

from gateway.config import LLMSettings
from gateway.llm.client import LLMClient
from gateway.llm.errors import (
    LLMAuthError,
    LLMBadResponse,
    LLMContextTooLong,
    LLMError,
    LLMRateLimited,
    LLMRequestError,
    LLMUnavailable,
)
from gateway.llm.transport import model_tls
from tests.certs import self_signed
from tests.fakes.llm import Reply, ScriptedLLM

KEY = "sk-test-SECRET-4f1c9a7e"
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "title": "WeatherArgs",
            "properties": {"city": {"type": "string", "title": "City"}},
            "required": ["city"],
        },
    },
}
USER = [{"role": "user", "content": "Weather in Paris?"}]


def make_settings(url: str, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {
        "base_url": url,
        "model": "fake-model",
        "api_key": SecretStr(KEY),
        "tool_call_format": "native",
        # The non-streaming path by default; streaming tests pass stream=True.
        "stream": False,
        "max_retries": 2,
        "retry_base_delay": 0.01,
        "retry_max_delay": 2.0,
    }
    values.update(overrides)
    return LLMSettings(**values)


@pytest.fixture
async def server() -> AsyncIterator[ScriptedLLM]:
    async with ScriptedLLM() as llm:
        yield llm


@pytest.fixture
async def client(server: ScriptedLLM) -> AsyncIterator[LLMClient]:
    async with LLMClient(make_settings(server.url)) as llm_client:
        yield llm_client


def sse(*chunks: Any) -> str:
    lines = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return "".join(lines)


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


SSE_HEADERS = {"Content-Type": "text/event-stream"}


# --- plain replies and native tool calls ---------------------------------------------------


async def test_plain_reply(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.text("Hello!", usage=(12, 3)))
    completion = await client.complete(USER)
    assert completion.content == "Hello!"
    assert completion.tool_calls == ()
    assert completion.finish_reason == "stop"
    assert completion.usage.total_tokens == 15
    assert completion.assistant_message() == {"role": "assistant", "content": "Hello!"}
    body = server.requests[0]
    assert body["model"] == "fake-model"
    assert body["messages"] == USER
    assert "tools" not in body and "tool_choice" not in body and "stream" not in body
    assert server.request_headers[0]["Authorization"] == f"Bearer {KEY}"


async def test_default_responder_echoes(server: ScriptedLLM, client: LLMClient) -> None:
    completion = await client.complete([{"role": "user", "content": "ping"}])
    assert completion.content == "echo: ping"


async def test_parallel_native_tool_calls(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.calls(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})))
    completion = await client.complete(USER, tools=[WEATHER_TOOL], tool_choice="auto")
    assert [c.name for c in completion.tool_calls] == ["get_weather", "get_weather"]
    assert [json.loads(c.arguments) for c in completion.tool_calls] == [
        {"city": "Paris"},
        {"city": "Rome"},
    ]
    assert len({c.id for c in completion.tool_calls}) == 2
    assert completion.finish_reason == "tool_calls"
    body = server.requests[0]
    assert body["tools"] == [WEATHER_TOOL] and body["tool_choice"] == "auto"
    message = completion.assistant_message()
    assert message["content"] is None
    assert message["tool_calls"][0] == {
        "id": completion.tool_calls[0].id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }


async def test_tolerates_server_quirks(server: ScriptedLLM, client: LLMClient) -> None:
    # Arguments as an object, no type, no id, null content, reasoning field, no usage.
    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "reasoning_content": "Paris, so call the tool.",
                    "tool_calls": [
                        {"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
                    ],
                },
                "finish_reason": "stop",
            }
        ]
    }
    server.push(Reply(raw_body=json.dumps(body)))
    completion = await client.complete(USER, tools=[WEATHER_TOOL])
    (call,) = completion.tool_calls
    assert call.id.startswith("call_") and len(call.id) > 10
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert completion.reasoning == "Paris, so call the tool."
    assert completion.usage.total_tokens == 0
    assert completion.finish_reason == "tool_calls"


async def test_think_block_goes_to_reasoning(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.text("<think>Easy one.</think>\n\nIt is 4.", reasoning=None))
    completion = await client.complete(USER)
    assert completion.content == "It is 4."
    assert completion.reasoning == "Easy one."


async def test_temperature_and_max_tokens(server: ScriptedLLM) -> None:
    async with LLMClient(make_settings(server.url, temperature=0.2, max_tokens=50)) as llm_client:
        await llm_client.complete(USER)
        await llm_client.complete(USER, max_tokens=7)
    assert server.requests[0]["temperature"] == 0.2
    assert server.requests[0]["max_tokens"] == 50
    assert server.requests[1]["max_tokens"] == 7


async def test_extra_headers_and_no_auth_without_key(server: ScriptedLLM) -> None:
    settings = make_settings(server.url, api_key=SecretStr(""), extra_headers={"X-Title": "cg"})
    async with LLMClient(settings) as llm_client:
        await llm_client.complete(USER)
    headers = server.request_headers[0]
    assert "Authorization" not in headers
    assert headers["X-Title"] == "cg"


# --- streaming -----------------------------------------------------------------------------


async def test_streaming_text_with_on_text_and_usage(
    server: ScriptedLLM, client: LLMClient
) -> None:
    server.push(Reply.text("The weather in Paris is sunny today.", usage=(40, 9)))
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    completion = await client.complete(USER, stream=True, on_text=on_text)
    assert completion.content == "The weather in Paris is sunny today."
    assert len(shown) >= 2
    assert "".join(shown) == completion.content
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (40, 9)
    body = server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_streaming_tool_calls_split_with_finish_stop(
    server: ScriptedLLM, client: LLMClient
) -> None:
    server.push(
        Reply(
            tool_calls=[("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})],
            finish_reason="stop",
        )
    )
    completion = await client.complete(USER, tools=[WEATHER_TOOL], stream=True)
    assert [json.loads(c.arguments) for c in completion.tool_calls] == [
        {"city": "Paris"},
        {"city": "Rome"},
    ]
    assert completion.finish_reason == "tool_calls"
    assert completion.usage.total_tokens == 15


async def test_streaming_quirky_deltas(server: ScriptedLLM, client: LLMClient) -> None:
    # No index at all, the id repeated on every chunk, arguments in pieces, no usage.
    raw = sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"id": "c1", "function": {"arguments": '{"ci'}}]}),
        chunk({"tool_calls": [{"id": "c1", "function": {"arguments": 'ty": "Paris"}'}}]}),
        chunk({"tool_calls": [{"id": "c2", "function": {"name": "now", "arguments": "{}"}}]}),
        chunk({}, "stop"),
        "[DONE]",
    )
    server.push(Reply(raw_body=raw, headers=SSE_HEADERS))
    completion = await client.complete(USER, tools=[WEATHER_TOOL], stream=True)
    assert [(c.id, c.name, c.arguments) for c in completion.tool_calls] == [
        ("c1", "get_weather", '{"city": "Paris"}'),
        ("c2", "now", "{}"),
    ]


async def test_stream_cut_short_is_retried_when_nothing_was_shown(
    server: ScriptedLLM, client: LLMClient
) -> None:
    server.push(
        Reply(raw_body=sse(chunk({"content": "Hel"})), headers=SSE_HEADERS),
        Reply.text("Hello again"),
    )
    completion = await client.complete(USER, stream=True)
    assert completion.content == "Hello again"
    assert len(server.requests) == 2


async def test_stream_cut_short_after_text_was_shown(
    server: ScriptedLLM, client: LLMClient
) -> None:
    server.push(Reply(raw_body=sse(chunk({"content": "Hel"})), headers=SSE_HEADERS))
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    with pytest.raises(LLMBadResponse):
        await client.complete(USER, stream=True, on_text=on_text)
    assert shown == ["Hel"]
    assert len(server.requests) == 1


async def test_unparsable_stream_chunk(server: ScriptedLLM, client: LLMClient) -> None:
    raw = sse(chunk({"content": "a"})) + "data: {not json\n\n" + sse("[DONE]")
    server.push(Reply(raw_body=raw, headers=SSE_HEADERS))
    with pytest.raises(LLMBadResponse):
        await client.complete(USER, stream=True)
    assert len(server.requests) == 1


async def test_server_ignoring_stream_flag(server: ScriptedLLM, client: LLMClient) -> None:
    body = {"choices": [{"message": {"role": "assistant", "content": "whole"}}]}
    server.push(Reply(raw_body=json.dumps(body)))
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    completion = await client.complete(USER, stream=True, on_text=on_text)
    assert completion.content == "whole" and shown == ["whole"]


# --- retries and errors --------------------------------------------------------------------


async def test_429_waits_retry_after_then_succeeds(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.error(429, "slow down", headers={"Retry-After": "0.4"}), Reply.text("ok"))
    started = time.monotonic()
    completion = await client.complete(USER)
    elapsed = time.monotonic() - started
    assert completion.content == "ok"
    assert 0.38 <= elapsed < 1.5
    assert len(server.requests) == 2


async def test_retry_after_beyond_cap_gives_up(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.error(429, "quota", headers={"Retry-After": "3600"}))
    started = time.monotonic()
    with pytest.raises(LLMRateLimited) as info:
        await client.complete(USER)
    assert time.monotonic() - started < 1
    assert info.value.retry_after == 3600
    assert "few minutes" in info.value.user_message
    assert len(server.requests) == 1


async def test_429_exhausts_retries(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(*[Reply.error(429, "busy") for _ in range(3)])
    with pytest.raises(LLMRateLimited):
        await client.complete(USER)
    assert len(server.requests) == 3  # first try + max_retries


async def test_500_then_success(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.error(500, "boom"), Reply.error(503, "overloaded"), Reply.text("ok"))
    completion = await client.complete(USER)
    assert completion.content == "ok"
    assert len(server.requests) == 3


async def test_5xx_exhausted_is_unavailable(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(*[Reply.error(502, "bad gateway") for _ in range(3)])
    with pytest.raises(LLMUnavailable) as info:
        await client.complete(USER, stream=True)
    assert info.value.status == 502
    assert len(server.requests) == 3


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_connection_refused_is_unavailable_fast() -> None:
    settings = make_settings(
        f"http://127.0.0.1:{_closed_port()}/v1", max_retries=1, retry_base_delay=0.001
    )
    started = time.monotonic()
    async with LLMClient(settings) as llm_client:
        with pytest.raises(LLMUnavailable) as info:
            await llm_client.complete(USER)
    assert time.monotonic() - started < 2
    assert "not reachable" in info.value.user_message


async def test_timeout_is_unavailable(server: ScriptedLLM) -> None:
    server.push(Reply.text("late", delay=1.0), Reply.text("late", delay=1.0))
    settings = make_settings(server.url, timeout=0.2, max_retries=1)
    async with LLMClient(settings) as llm_client:
        with pytest.raises(LLMUnavailable, match="timed out"):
            await llm_client.complete(USER)


async def test_401_is_auth_error_not_retried(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.error(401, "Invalid API key"))
    with pytest.raises(LLMAuthError) as info:
        await client.complete(USER)
    assert "llm.api_key" in info.value.user_message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000"),
        (400, "the request exceeds the available context size, try increasing it"),
        (413, "Payload Too Large"),
    ],
)
async def test_context_too_long(
    server: ScriptedLLM, client: LLMClient, status: int, message: str
) -> None:
    server.push(Reply.error(status, message))
    with pytest.raises(LLMContextTooLong) as info:
        await client.complete(USER)
    assert "new conversation" in info.value.user_message
    assert len(server.requests) == 1


async def test_model_not_found(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.error(404, 'model "fake-model" not found, try pulling it first'))
    with pytest.raises(LLMRequestError) as info:
        await client.complete(USER)
    assert "'fake-model'" in info.value.user_message and "llm.model" in info.value.user_message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    "raw",
    ["{not json", "[]", '{"choices": []}', '{"choices": [{"finish_reason": "stop"}]}'],
)
async def test_malformed_response(server: ScriptedLLM, client: LLMClient, raw: str) -> None:
    server.push(Reply(raw_body=raw))
    with pytest.raises(LLMBadResponse):
        await client.complete(USER)


async def test_gzip_encoded_answers(server: ScriptedLLM, client: LLMClient) -> None:
    """Servers may compress what they answer (the client's Accept-Encoding allows it): a reply
    and an error body are both read through the encoding."""
    server.push(Reply.text("packed", gzip=True))
    assert (await client.complete(USER)).content == "packed"
    server.push(Reply.error(400, "unknown field 'frobnicate'", gzip=True))
    with pytest.raises(LLMRequestError) as info:
        await client.complete(USER)
    assert "unknown field 'frobnicate'" in info.value.detail
    assert server.request_headers[-1]["Accept-Encoding"].startswith("gzip")


@pytest.mark.parametrize(
    "reply",
    [
        Reply.error(401, f"Incorrect API key provided: {KEY}"),
        Reply.error(400, f"bad header Authorization: Bearer {KEY}"),
        Reply.error(500, f"upstream said {KEY}"),
        Reply.error(429, f"key {KEY} over quota", headers={"Retry-After": "999"}),
        Reply(raw_body=f"<html>{KEY}</html>"),
    ],
    ids=["401", "400-bearer", "500", "429", "html"],
)
async def test_api_key_never_in_errors(server: ScriptedLLM, reply: Reply) -> None:
    server.push(reply, reply, reply)
    async with LLMClient(make_settings(server.url)) as llm_client:
        with pytest.raises(LLMError) as info:
            await llm_client.complete(USER)
    error = info.value
    for text in (str(error), repr(error), error.user_message, error.detail, str(error.__cause__)):
        assert KEY not in text


async def test_api_key_not_in_connection_errors() -> None:
    settings = make_settings(f"http://127.0.0.1:{_closed_port()}/v1", max_retries=0)
    async with LLMClient(settings) as llm_client:
        with pytest.raises(LLMError) as info:
            await llm_client.complete(USER)
    assert KEY not in str(info.value) and KEY not in repr(info.value.__cause__)


# --- text tool-call mode -------------------------------------------------------------------

HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "c2", "content": "rain"},
]


async def test_text_mode_round_trip(server: ScriptedLLM) -> None:
    server.push(
        Reply.text(
            'Checking tomorrow too.\n<tool_call>{"name": "get_weather", "arguments": '
            '{"city": "Paris"}}</tool_call>'
        )
    )
    async with LLMClient(make_settings(server.url, tool_call_format="text")) as llm_client:
        assert llm_client.format == "text"
        completion = await llm_client.complete(HISTORY, tools=[WEATHER_TOOL])
    body = server.requests[0]
    assert "tools" not in body and "tool_choice" not in body
    system, user, assistant, results = body["messages"]
    assert system["role"] == "system" and system["content"].startswith("You are helpful.")
    assert "get_weather: Current weather for a city." in system["content"]
    assert '{"type":"object","properties":{"city":{"type":"string"}}' in system["content"]
    assert "title" not in system["content"]
    assert '<tool_call>{"name": "tool_name", "arguments": {' in system["content"]
    assert user == HISTORY[1]
    paris, rome = ({"name": "get_weather", "arguments": {"city": c}} for c in ("Paris", "Rome"))
    assert assistant == {
        "role": "assistant",
        "content": f"<tool_call>{json.dumps(paris)}</tool_call>\n"
        f"<tool_call>{json.dumps(rome)}</tool_call>",
    }
    assert results == {
        "role": "user",
        "content": '<tool_response name="get_weather">\nsunny\n</tool_response>\n'
        '<tool_response name="get_weather">\nrain\n</tool_response>',
    }
    assert HISTORY[2]["tool_calls"][0]["id"] == "c1"  # caller's history untouched
    (call,) = completion.tool_calls
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.id.startswith("call_")
    assert completion.content == "Checking tomorrow too."
    assert completion.finish_reason == "tool_calls"
    assert completion.assistant_message()["tool_calls"][0]["id"] == call.id


async def test_text_mode_streaming_hides_markup(server: ScriptedLLM) -> None:
    server.push(
        Reply.text(
            '<think>plan</think>One moment. <tool_call>{"name": "get_weather", '
            '"arguments": {"city": "Paris"}}</tool_call>'
        )
    )
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    async with LLMClient(make_settings(server.url, tool_call_format="text")) as llm_client:
        completion = await llm_client.complete(
            USER, tools=[WEATHER_TOOL], stream=True, on_text=on_text
        )
    assert "".join(shown).strip() == "One moment."
    assert completion.reasoning == "plan"
    assert [c.name for c in completion.tool_calls] == ["get_weather"]


async def test_text_mode_without_tools_still_converts_history(server: ScriptedLLM) -> None:
    async with LLMClient(make_settings(server.url, tool_call_format="text")) as llm_client:
        await llm_client.complete(HISTORY)
    roles = [m["role"] for m in server.requests[0]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert "# Tools" not in server.requests[0]["messages"][0]["content"]


async def test_auto_falls_back_to_text_when_tools_refused(server: ScriptedLLM) -> None:
    server.push(
        Reply.error(400, "registry.ollama.ai/library/gemma:2b does not support tools"),
        Reply.text(
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
        ),
        Reply.text("It is sunny."),
    )
    async with LLMClient(make_settings(server.url, tool_call_format="auto")) as llm_client:
        before = llm_client.format
        first = await llm_client.complete(USER, tools=[WEATHER_TOOL])
        assert (before, llm_client.format) == ("native", "text")  # switched on the refusal
        second = await llm_client.complete(USER, tools=[WEATHER_TOOL])
    assert [c.name for c in first.tool_calls] == ["get_weather"]
    assert second.content == "It is sunny."
    assert "tools" in server.requests[0]
    assert "tools" not in server.requests[1] and "tools" not in server.requests[2]
    assert "get_weather" in server.requests[1]["messages"][0]["content"]


async def test_native_mode_does_not_fall_back(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.error(400, "this model does not support tools"))
    with pytest.raises(LLMRequestError) as info:
        await client.complete(USER, tools=[WEATHER_TOOL])
    assert "tool_call_format" in info.value.user_message
    assert client.format == "native"


async def test_auto_accepts_text_calls_from_native_server(server: ScriptedLLM) -> None:
    server.push(
        Reply.text('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]'),
        Reply.text('{"name": "delete_everything", "arguments": {}}'),
    )
    async with LLMClient(make_settings(server.url, tool_call_format="auto")) as llm_client:
        parsed = await llm_client.complete(USER, tools=[WEATHER_TOOL])
        unknown = await llm_client.complete(USER, tools=[WEATHER_TOOL])
        assert llm_client.format == "native"
    assert [c.name for c in parsed.tool_calls] == ["get_weather"]
    assert parsed.content is None
    # Bare JSON naming a tool that was not offered stays text.
    assert unknown.tool_calls == () and unknown.content is not None


# --- doctor check --------------------------------------------------------------------------


async def test_check_lists_model() -> None:
    async with (
        ScriptedLLM(models=("fake-model", "other")) as server,
        LLMClient(make_settings(server.url)) as llm_client,
    ):
        line = await llm_client.check()
    assert "2 model(s)" in line and "'fake-model' available" in line
    assert KEY not in line
    assert server.requests == []


async def test_check_model_not_listed_tries_a_completion() -> None:
    async with (
        ScriptedLLM(models=("other",)) as server,
        LLMClient(make_settings(server.url)) as llm_client,
    ):
        line = await llm_client.check()
    assert "answers" in line and "not in its list" in line
    assert server.requests[0]["max_tokens"] == 1


@contextlib.asynccontextmanager
async def serving(handler: Callable[[web.Request], Awaitable[web.Response]]) -> AsyncIterator[str]:
    """A server on 127.0.0.1 answering every path with `handler`; yields its /v1 address."""
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", handler)
    async with TestServer(app, host="127.0.0.1") as server:
        yield str(server.make_url("/v1"))


async def test_check_without_models_endpoint() -> None:
    async def handler(request: web.Request) -> web.Response:
        if request.path.endswith("/models"):
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response({"choices": [{"message": {"content": "p"}}]})

    async with serving(handler) as url, LLMClient(make_settings(url)) as llm_client:
        line = await llm_client.check()
    assert "lists no models" in line


async def test_check_auth_error() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "bad key"}}, status=401)

    async with serving(handler) as url, LLMClient(make_settings(url)) as llm_client:
        with pytest.raises(LLMAuthError):
            await llm_client.check()


# --- server oddities -----------------------------------------------------------------------


async def test_stream_options_refused_is_dropped(server: ScriptedLLM, client: LLMClient) -> None:
    server.push(Reply.error(400, "Unrecognized request argument supplied: stream_options"))
    completion = await client.complete(USER, stream=True)
    assert completion.content == "echo: Weather in Paris?"
    assert "stream_options" not in server.requests[1]
    await client.complete(USER, stream=True)
    assert "stream_options" not in server.requests[2]


async def test_error_object_in_a_200_body_is_retried(
    server: ScriptedLLM, client: LLMClient
) -> None:
    server.push(Reply(raw_body='{"error": {"message": "Provider returned error", "code": 502}}'))
    completion = await client.complete(USER)
    assert completion.content == "echo: Weather in Paris?"
    assert len(server.requests) == 2


async def test_error_event_in_stream(server: ScriptedLLM, client: LLMClient) -> None:
    raw = sse({"error": {"message": "maximum context length exceeded", "code": 400}})
    server.push(Reply(raw_body=raw, headers=SSE_HEADERS))
    with pytest.raises(LLMContextTooLong):
        await client.complete(USER, stream=True)


async def test_auto_keeps_native_when_one_tool_schema_is_bad(server: ScriptedLLM) -> None:
    server.push(Reply.error(400, "Invalid 'tools[0].function.name': string does not match"))
    async with LLMClient(make_settings(server.url, tool_call_format="auto")) as llm_client:
        with pytest.raises(LLMRequestError):
            await llm_client.complete(USER, tools=[WEATHER_TOOL])
        assert llm_client.format == "native"


async def test_concurrent_requests_share_one_client(server: ScriptedLLM, client: LLMClient) -> None:
    replies = await asyncio.gather(
        *(client.complete([{"role": "user", "content": str(i)}]) for i in range(50))
    )
    assert [r.content for r in replies] == [f"echo: {i}" for i in range(50)]
    await server.wait_for_requests(50, timeout=1)


@pytest.fixture
def ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every TLS context made with a CA file from here on (the model clients' is certifi's)."""
    made: list[object] = []
    real = ssl.create_default_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        if kwargs.get("cafile"):
            made.append(kwargs["cafile"])
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    model_tls.cache_clear()
    return made


async def test_a_model_on_plain_http_loads_no_ca_bundle(
    server: ScriptedLLM, ca_loads: list[object]
) -> None:
    async with LLMClient(make_settings(server.url)) as llm_client:
        completion = await llm_client.complete(USER)
    assert completion.content
    assert ca_loads == []


async def test_https_models_share_one_ca_bundle_that_refuses_an_unknown_certificate(
    tmp_path: Path, ca_loads: list[object]
) -> None:
    cert, key = self_signed(tmp_path)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    port = runner.addresses[0][1]
    try:
        for _ in range(2):
            settings = make_settings(f"https://127.0.0.1:{port}/v1", max_retries=0)
            async with LLMClient(settings) as llm_client:
                with pytest.raises(LLMError, match="CERTIFICATE_VERIFY_FAILED"):
                    await llm_client.complete(USER)
    finally:
        await runner.cleanup()
    assert seen == []  # the handshake failed: no request reached the server
    assert len(ca_loads) == 1  # loaded once, for both clients
