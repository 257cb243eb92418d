"""The OpenAI-compatible API driven by the official `openai` client: a plain answer, a streamed
one, a tool-using one, memory across requests that send only the new message, bad keys and
models, approvals (pending and waiting, relayed to an admin) and a question answered later."""

from __future__ import annotations

import asyncio
import base64
import io
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import pytest_asyncio
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionContentPartParam
from PIL import Image

from adapters.web.adapter import WebAdapter
from gateway.app.app import App
from gateway.sdk.messages import ButtonPress, ChatRef, UserRef
from gateway.sessions.key import SessionKey
from gateway.web.transcript import ChatMessage
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.web_kit import (
    API_KEY,
    Site,
    base_url,
    build_dir,
    pending_id,
    running_site,
    web_chat,
    web_gateway,
    web_settings,
)

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]


@dataclass
class Api:
    site: Site
    client: AsyncOpenAI

    @property
    def app(self) -> App:
        return self.site.app

    @property
    def llm(self) -> ScriptedLLM:
        return self.site.llm

    @property
    def url(self) -> str:
        return self.site.url


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    tmp = tmp_path_factory.mktemp("api")
    sections = {
        "api": {"approval_wait": "pending", "models": {"terse-bot": "terse"}},
        "llm": {"stream": True},
        "profiles": {"terse": {"system_prompt": "Answer in one word.", "temperature": 0.1}},
    }
    async with running_site(tmp, browser=False, **sections) as site:
        client = AsyncOpenAI(base_url=f"{site.url}/v1", api_key=API_KEY, max_retries=0)
        yield Api(site, client)
        await client.close()


@pytest.fixture(autouse=True)
def fresh_llm(api: Api) -> None:
    api.llm.reset()


def api_chat() -> ChatRef:
    return ChatRef(platform="api", chat_id="bob")


async def test_models_and_a_plain_answer(api: Api) -> None:
    models = await api.client.models.list()
    assert [m.id for m in models.data] == ["chatgate", "terse-bot"]
    answer = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "hello"}], user="plain"
    )
    assert answer.choices[0].message.content == "echo: hello"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.usage is not None and answer.usage.total_tokens == 15
    # The turn ran as the key's user, in the agent's own prompt and tools.
    sent = api.llm.requests[-1]
    assert sent["model"] == "fake-model" and sent["messages"][0]["role"] == "system"
    assert any(t["function"]["name"] == "shell" for t in sent["tools"])


async def test_the_model_name_selects_a_profile(api: Api) -> None:
    answer = await api.client.chat.completions.create(
        model="terse-bot", messages=[{"role": "user", "content": "hi"}], user="terse"
    )
    assert answer.choices[0].message.content == "echo: hi"
    sent = api.llm.requests[-1]
    assert sent["temperature"] == 0.1
    assert "Answer in one word." in sent["messages"][0]["content"]
    await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "hi"}], user="bound"
    )
    assert "temperature" not in api.llm.requests[-1]
    assert "Answer in one word." not in api.llm.requests[-1]["messages"][0]["content"]


async def test_a_streamed_answer(api: Api) -> None:
    api.llm.push(Reply.streamed("one two three four five", chunks=4, delay=0.5))
    stream = await api.client.chat.completions.create(
        model="chatgate",
        messages=[{"role": "user", "content": "stream this"}],
        stream=True,
        stream_options={"include_usage": True},
        user="streamed",
    )
    chunks = [chunk async for chunk in stream]
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert "".join(d.content or "" for d in deltas) == "one two three four five"
    # The reply came in pieces as the model wrote it, not in one piece at the end.
    assert len([d for d in deltas if d.content]) >= 3
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5


async def test_a_tool_using_answer(api: Api) -> None:
    api.llm.push(
        Reply.call("memory", action="add", target="user", text="prefers tea"),
        Reply.text("Noted: you prefer tea."),
    )
    answer = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "I prefer tea"}], user="tools"
    )
    assert answer.choices[0].message.content == "Noted: you prefer tea."
    assert "prefers tea" in tool_results(api.llm.requests[-1])[0]
    notes = await api.app.memory.notes(api_chat(), UserRef(platform="api", user_id="bob"))
    assert notes.user == ["prefers tea"]


async def test_memory_across_requests_that_send_only_the_new_message(api: Api) -> None:
    headers = {"X-Chatgate-Session": "ada"}
    first = await api.client.chat.completions.create(
        model="chatgate",
        messages=[{"role": "user", "content": "My name is Ada."}],
        extra_headers=headers,
    )
    assert first.choices[0].message.content == "echo: My name is Ada."
    api.llm.push(Reply.text("Your name is Ada."))
    second = await api.client.chat.completions.create(
        model="chatgate",
        messages=[{"role": "user", "content": "What is my name?"}],
        extra_headers=headers,
    )
    assert second.choices[0].message.content == "Your name is Ada."
    history = [(m["role"], m["content"]) for m in api.llm.requests[-1]["messages"][1:]]
    assert history == [
        ("user", "My name is Ada."),
        ("assistant", "echo: My name is Ada."),
        ("user", "What is my name?"),
    ]
    # Another conversation of the same key starts empty.
    await api.client.chat.completions.create(
        model="chatgate",
        messages=[{"role": "user", "content": "Who am I?"}],
        extra_headers={"X-Chatgate-Session": "other"},
    )
    assert len(api.llm.requests[-1]["messages"]) == 2
    record = await api.app.sessions.load(SessionKey("api", "bob", "ada"))
    assert record.turns == 2


async def test_a_bad_key_and_an_unknown_model_are_refused(api: Api) -> None:
    wrong = AsyncOpenAI(base_url=f"{api.url}/v1", api_key="sk-not-a-key-000000000", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        await wrong.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": "hi"}]
        )
    assert refused.value.code == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        await wrong.models.list()
    await wrong.close()
    with pytest.raises(openai.NotFoundError, match="serves 'chatgate', 'terse-bot'"):
        await api.client.chat.completions.create(
            model="gpt-9", messages=[{"role": "user", "content": "hi"}]
        )
    assert api.llm.requests == []  # nothing reached the model


def png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), "blue").save(out, "PNG")
    return out.getvalue()


async def test_an_image_part_reaches_the_model_and_web_urls_are_refused(api: Api) -> None:
    data_url = "data:image/png;base64," + base64.b64encode(png(3000, 1500)).decode()
    content: list[ChatCompletionContentPartParam] = [
        {"type": "text", "text": "what colour is this?"},
        {"type": "image_url", "image_url": {"url": data_url}},
    ]
    answer = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": content}], user="pictures"
    )
    assert answer.choices[0].message.content.startswith("echo: ")  # type: ignore[union-attr]
    parts = api.llm.requests[-1]["messages"][-1]["content"]
    assert "what colour is this?" in parts[0]["text"]
    [image] = [p for p in parts if p["type"] == "image_url"]
    seen = Image.open(io.BytesIO(base64.b64decode(image["image_url"]["url"].split(",", 1)[1])))
    assert seen.size == (1568, 784)  # scaled to media.max_image_px like any platform's photo

    before = len(api.llm.requests)
    refused: list[tuple[list[ChatCompletionContentPartParam], str]] = [
        ([{"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/x.png"}}], "data: URLs"),
        ([{"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}], "base64"),
        ([{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}], "not taken"),
        ([{"type": "text", "text": "  "}], "neither text nor an image"),
    ]
    for parts, reason in refused:
        with pytest.raises(openai.BadRequestError, match=reason):
            await api.client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": parts}]
            )
    huge = "data:image/png;base64," + "A" * 21_000_000
    big: list[ChatCompletionContentPartParam] = [{"type": "image_url", "image_url": {"url": huge}}]
    with pytest.raises(openai.APIStatusError, match=r"api\.max_request_mb") as too_large:
        await api.client.chat.completions.create(
            model="chatgate", messages=[{"role": "user", "content": big}]
        )
    assert too_large.value.status_code == 413
    assert len(api.llm.requests) == before  # nothing reached the model


async def test_an_approval_pending_then_its_outcome_with_the_next_reply(api: Api) -> None:
    app = api.app
    build = build_dir(app, api_chat())
    api.llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Removed it."))
    answer = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "remove build"}], user="ops"
    )
    text = answer.choices[0].message.content or ""
    assert "Approval needed" in text and "rm -rf build" in text
    assert "needs an operator's approval" in text
    assert build.exists()
    # An operator decides in the console; the turn goes on without anyone waiting.
    operator = UserRef(platform="web", user_id="admin", display_name="admin")
    decided, _ = await app.approvals.decide_as_operator(await pending_id(app), operator, "once")
    assert decided
    for _ in range(250):
        if not build.exists() and not await app.store.pending("api:bob:tops"):
            break
        await asyncio.sleep(0.02)
    assert not build.exists()
    later = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "and?"}], user="ops"
    )
    text = later.choices[0].message.content or ""
    assert text.startswith("Earlier replies in this conversation:")
    assert "Approved by admin." in text and "Removed it." in text
    assert text.endswith("echo: and?")


async def test_the_key_holder_cannot_approve_their_own_request(api: Api) -> None:
    """Issue 30 finding 12: the API's requests are decided by operators; `/approve ID` sent
    with the requester's own key is refused (and denying stays theirs)."""
    app = api.app
    build = build_dir(app, api_chat())
    api.llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Left it."))
    asked = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "remove build"}], user="self"
    )
    assert "Approval needed" in (asked.choices[0].message.content or "")
    request_id = await pending_id(app)
    for conversation in ("self", "elsewhere"):  # the same key, any conversation
        approved = await api.client.chat.completions.create(
            model="chatgate",
            messages=[{"role": "user", "content": f"/approve {request_id}"}],
            user=conversation,
        )
        text = approved.choices[0].message.content or ""
        assert "approved by an operator" in text, text
    assert await app.approvals._answers.current(request_id) is None
    assert [r.id for r in await app.approvals.pending_requests()] == [request_id]
    assert build.exists()
    denied = await api.client.chat.completions.create(
        model="chatgate",
        messages=[{"role": "user", "content": f"/deny {request_id} not now"}],
        user="self",
    )
    assert "Denied." in (denied.choices[0].message.content or "")
    for _ in range(250):
        if not await app.store.pending("api:bob:tself"):
            break
        await asyncio.sleep(0.02)
    assert build.exists()
    assert tool_results(api.llm.requests[-1]) == ["error: not run: denied by bob: not now"]


async def test_a_question_answered_by_the_next_request(api: Api) -> None:
    api.llm.push(
        Reply.call("clarify", question="Which colour?", choices=["red", "blue"]),
        Reply.text("Blue it is."),
    )
    asked = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "paint it"}], user="colours"
    )
    text = asked.choices[0].message.content or ""
    assert "Which colour?" in text and "1. red\n2. blue" in text
    answered = await api.client.chat.completions.create(
        model="chatgate", messages=[{"role": "user", "content": "2"}], user="colours"
    )
    assert "Blue it is." in (answered.choices[0].message.content or "")
    assert tool_results(api.llm.requests[-1]) == ["bob answered: blue"]


async def test_waiting_for_an_approval_relayed_to_an_admin(tmp_path: Path, api: Api) -> None:
    """approval_wait = "wait": the streamed response shows the prompt and waits; the request
    goes to the admins (here a web chat admin), whose press decides it."""
    settings = web_settings(tmp_path, api.llm.url, access={"admins": ["web:ops"]})
    async with web_gateway(settings) as app:
        client = AsyncOpenAI(base_url=f"{base_url(app)}/v1", api_key=API_KEY, max_retries=0)
        build = build_dir(app, api_chat())
        api.llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("All clean."))
        stream = await client.chat.completions.create(
            model="chatgate",
            messages=[{"role": "user", "content": "clean up"}],
            stream=True,
        )
        received: list[str] = []

        async def read() -> None:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    received.append(chunk.choices[0].delta.content)

        reading = asyncio.create_task(read())
        request_id = await pending_id(app)
        web = app.outbox.adapter("web")
        assert isinstance(web, WebAdapter)
        relayed: list[ChatMessage] = []
        deadline = time.monotonic() + 10
        while not relayed and time.monotonic() < deadline:
            relayed = [m for m in await web.messages.all("web:ops/notices") if request_id in m.text]
            await asyncio.sleep(0.05)
        assert relayed, "the admin got the request"
        assert "Approval needed" in "".join(received)  # the stream shows the prompt meanwhile
        assert not reading.done()
        approve = next(b for row in relayed[0].buttons for b in row if b.label == "Approve once")
        reply = await app.extensions.press(
            ButtonPress(
                event_id="relay-press",
                chat=web_chat("ops", "notices"),
                user=UserRef(platform="web", user_id="ops", display_name="ops"),
                data=approve.data,
            )
        )
        assert reply.toast == "Approved."
        await asyncio.wait_for(reading, 20)
        text = "".join(received)
        assert "Approved by ops." in text and text.endswith("All clean.")
        assert not build.exists()
        await client.close()


@pytest.mark.redis
async def test_a_request_whose_turn_runs_on_another_replica(
    tmp_path: Path, redis_url: str, api: Api
) -> None:
    """Replica A takes the request but has no free slot, so replica B runs the turn; A still
    answers, from what B stored."""

    def responder(request: dict[str, Any]) -> Reply:
        text = last_user_text(request)
        return Reply.text(f"done: {text}", delay=2.0 if text == "slow" else 0.0)

    api.llm.reset(responder)
    prefix = f"replicas-{uuid.uuid4().hex[:8]}"
    one_slot = {"max_concurrent_turns": 1}
    a = web_settings(
        tmp_path / "a", api.llm.url, redis_url=redis_url, key_prefix=prefix, router=one_slot
    )
    b = web_settings(tmp_path / "b", api.llm.url, redis_url=redis_url, key_prefix=prefix)
    async with web_gateway(a) as first, web_gateway(b) as second:
        client = AsyncOpenAI(base_url=f"{base_url(first)}/v1", api_key=API_KEY, max_retries=0)

        async def ask(text: str, conversation: str) -> str:
            answer = await client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": text}], user=conversation
            )
            return answer.choices[0].message.content or ""

        slow = asyncio.create_task(ask("slow", "one"))
        await asyncio.sleep(0.5)  # A's only slot is taken by the slow turn
        assert await ask("quick", "two") == "done: quick"
        assert await slow == "done: slow"
        # Each replica ran one turn: A the slow one, B the quick one A answered.
        assert first.metrics.total("turns_total", status="ok") == 1
        assert second.metrics.total("turns_total", status="ok") == 1
        await client.close()


async def test_malformed_requests_are_400_and_reach_nothing(api: Api) -> None:
    """Issue 30: JSON nested 100,000 deep and `stream_options` that is not an object were
    500s with a traceback; they are 400s in the API's error shape."""
    with pytest.raises(openai.BadRequestError, match="stream_options must be an object"):
        await api.client.chat.completions.create(
            model="chatgate",
            messages=[{"role": "user", "content": "hi"}],
            # Not an object: the typed client refuses this, so it goes in the raw body.
            extra_body={"stream_options": "yes"},
        )
    deep = b'{"model": "chatgate", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    async with httpx.AsyncClient() as client:
        for body in (deep, b"[" * 100_000 + b"]" * 100_000, b'{"model": "\xff"}'):
            response = await client.post(
                f"{api.url}/v1/chat/completions",
                content=body,
                headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"},
            )
            assert response.status_code == 400
            error = response.json()["error"]
            assert error["type"] == "invalid_request_error"
            assert error["message"].startswith("The body is not valid JSON")
        for shape in MALFORMED_COMPLETIONS:
            response = await client.post(
                f"{api.url}/v1/chat/completions",
                json={"model": "chatgate", **shape},
                headers={"Authorization": f"Bearer {API_KEY}"},
            )
            assert response.status_code == 400, (shape, response.text)
            assert response.json()["error"]["type"] == "invalid_request_error"
    assert api.llm.requests == []


MALFORMED_COMPLETIONS: list[dict[str, Any]] = [
    {"messages": "hi"},
    {"messages": [5]},
    {"messages": [{"role": "user", "content": 5}]},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": 5}]}]},
    {"messages": [{"role": "user", "content": [5]}]},
    {"messages": [{"role": 5, "content": "hi"}]},
    {"messages": [{"role": "user", "content": "hi"}], "stream_options": [1]},
]
