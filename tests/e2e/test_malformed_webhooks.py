"""Malformed webhook bodies over real HTTP: a 4xx (or an ignored 200), never a 500 and a
traceback, and nothing processed; the gateway keeps answering well-formed calls after them."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from gateway.app.app import App
from gateway.store import keys
from tests.e2e.test_telegram import SECRET as TG_SECRET
from tests.e2e.test_telegram import telegram_gateway
from tests.fakes.llm import ScriptedLLM
from tests.fakes.slack import (
    BOT_TOKEN,
    SECRET,
    FakeSlack,
    block_actions,
    deliver,
    event_callback,
    events_url,
    mention,
    slack_gateway,
)
from tests.fakes.telegram import FakeBotAPI
from tests.harness import gateway_settings

pytestmark = pytest.mark.e2e


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert failures == [], [r.getMessage() for r in failures]


# -- Telegram -------------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000  # Python's own parser gives up near 1,000 levels


def deep_update() -> str:
    return '{"update_id": 5, "message": ' + "[" * 100_000 + "]" * 100_000 + "}"


SENDER = '{"id": 5, "is_bot": false, "first_name": "E"}'

NOT_UPDATES: list[str | bytes] = [
    b"\xff\xfe not UTF-8",
    "[]",
    "null",
    '"text"',
    "42",
    "{}",
    "not json",
    '{"update_id": "5"}',
    '{"update_id": true}',
    '{"update_id": 5, "message": "text"}',
    '{"update_id": 5, "message": {"message_id": 1, "date": 0, "chat": 5}}',
    DEEP,
    deep_update(),
    '{"update_id": 5, "message": {"message_id": 1, "date": 0, "text": ["a", "list"],'
    f' "chat": {{"id": 5, "type": "private"}}, "from": {SENDER}}}}}',
    '{"update_id": 5, "message": {"message_id": 1, "date": 0, "text": "hi", "from": 5,'
    ' "chat": {"id": 5, "type": "private"}}}',
    '{"update_id": 5, "message": {"message_id": 1, "date": 0, "text": "/start",'
    ' "entities": [{"type": "bot_command", "offset": "0", "length": 6}],'
    f' "chat": {{"id": 5, "type": "private"}}, "from": {SENDER}}}}}',
    '{"update_id": 5, "callback_query": {"id": "1", "data": ["x"], "chat_instance": "c",'
    ' "from": {"id": 5, "is_bot": false, "first_name": "E"}}}',
]


async def test_telegram_webhook_refuses_bodies_that_are_not_updates(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture
) -> None:
    telegram = {
        "mode": "webhook",
        "webhook_url": "https://bot.example.org/telegram/webhook",
        "webhook_secret": TG_SECRET,
    }
    http = {"enabled": True, "port": 0}
    caplog.set_level(logging.WARNING)
    async with telegram_gateway(tmp_path, llm, tg, telegram=telegram, http=http) as app:
        assert app.http is not None
        url = f"http://127.0.0.1:{app.http.port}/telegram/webhook"
        headers = {"Content-Type": "application/json", "X-Telegram-Bot-Api-Secret-Token": TG_SECRET}
        async with httpx.AsyncClient() as client:
            statuses = {}
            for body in NOT_UPDATES:
                response = await client.post(url, content=body, headers=headers)
                statuses[str(body)] = response.status_code
            assert statuses == dict.fromkeys(statuses, 400)
            await asyncio.sleep(0.3)
            assert llm.requests == [] and tg.sent() == []
            # Refused before anything was stored for reading later.
            assert await app.store.hgetall(keys.TELEGRAM_RECEIVED) == {}
            update = {"update_id": 7001, "message": tg.message("still here")}
            response = await client.post(url, content=json.dumps(update), headers=headers)
            assert response.status_code == 200
            [reply] = await tg.wait_sent(1)
    assert reply.text == "echo: still here"
    no_tracebacks(caplog)


# -- Slack ----------------------------------------------------------------------------------


@pytest.fixture
async def slack_app(tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack) -> AsyncIterator[App]:
    settings = gateway_settings(
        tmp_path,
        llm.url,
        http={"enabled": True, "port": 0},
        scheduler={"enabled": False},
        slack={"bot_token": BOT_TOKEN, "signing_secret": SECRET, "api_url": slack.api_url},
    )
    async with slack_gateway(settings) as app:
        yield app


def signed_with(timestamp: str, body: str) -> dict[str, str]:
    """Slack's signature headers, computed over any timestamp text (even a non-numeric one)."""
    digest = hmac.new(SECRET.encode(), f"v0:{timestamp}:{body}".encode(), hashlib.sha256)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


def signed_bytes(body: bytes) -> dict[str, str]:
    timestamp = str(int(time.time()))
    digest = hmac.new(SECRET.encode(), f"v0:{timestamp}:".encode() + body, hashlib.sha256)
    return {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": f"v0={digest.hexdigest()}"}


async def post_bytes(app: App, body: bytes, headers: dict[str, str], form: bool = False) -> int:
    kind = "application/x-www-form-urlencoded" if form else "application/json"
    async with httpx.AsyncClient() as client:
        response = await client.post(
            events_url(app), content=body, headers={"Content-Type": kind, **headers}
        )
    return response.status_code


@pytest.mark.parametrize("form", [False, True], ids=["json", "form"])
async def test_slack_body_that_is_not_utf8_is_a_4xx_signed_or_not(
    slack_app: App, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture, form: bool
) -> None:
    """Issue 30: the SDK's verifier decoded the body as UTF-8 before the signature was known
    to be good, so any unsigned non-UTF-8 body was a 500 with a traceback."""
    caplog.set_level(logging.WARNING)
    body = b"payload=\xff\xfe" if form else b'{"type": "\xff\xfe"}'
    unsigned = {"X-Slack-Request-Timestamp": str(int(time.time())), "X-Slack-Signature": "v0=0"}
    assert await post_bytes(slack_app, body, unsigned, form) == 401
    assert await post_bytes(slack_app, body, signed_bytes(body), form) == 400
    await asyncio.sleep(0.3)
    assert llm.requests == []
    no_tracebacks(caplog)


@pytest.mark.parametrize("timestamp", ["abc", "", "1e9", "12.5"])
async def test_slack_non_numeric_timestamp_is_401_before_anything_else(
    slack_app: App, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture, timestamp: str
) -> None:
    caplog.set_level(logging.WARNING)
    body = json.dumps(event_callback(mention("hello")))
    for headers in (signed_with(timestamp, body), {"X-Slack-Request-Timestamp": timestamp}):
        delivery = await deliver(events_url(slack_app), body, signed=False, headers=headers)
        assert delivery.status == 401
    await asyncio.sleep(0.3)
    assert llm.requests == []
    no_tracebacks(caplog)


SLACK_MALFORMED = {
    "array": "[]",
    "null": "null",
    "string": '"text"',
    "not-json": "{not json",
    "event-null": json.dumps({**event_callback({}), "event": None}),
    "event-array": json.dumps({**event_callback({}), "event": []}),
    "event-missing": json.dumps({"type": "event_callback", "event_id": "Ev1"}),
    "event-without-type": json.dumps(event_callback({"channel": "C1", "ts": "1.2"})),
    "mention-without-channel": json.dumps(event_callback({"type": "app_mention", "ts": "1.2"})),
    "authorizations-not-a-list": json.dumps({**event_callback(mention("x")), "authorizations": 5}),
    "files-not-a-list": json.dumps(event_callback({**mention("x"), "files": "f"})),
    "nested-100000-deep": DEEP,
    "event-nested-deep": json.dumps(event_callback({}))[:-1] + ', "deep": ' + DEEP + "}",
}


@pytest.mark.parametrize("body", SLACK_MALFORMED.values(), ids=SLACK_MALFORMED.keys())
async def test_slack_signed_malformed_bodies_are_400(
    slack_app: App, slack: FakeSlack, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture, body: str
) -> None:
    caplog.set_level(logging.WARNING)
    delivery = await deliver(events_url(slack_app), body)
    assert delivery.status == 400
    await asyncio.sleep(0.3)
    assert llm.requests == [] and slack.calls_to("chat.postMessage") == []
    no_tracebacks(caplog)


@pytest.mark.parametrize(
    "form",
    [
        "payload=%5B%5D",
        "payload=null",
        "payload=%7Bnot",
        "command=%2Fchatgate&text=hi",
        "payload=" + "%5B" * 100_000 + "%5D" * 100_000,
    ],
    ids=[
        "payload-array",
        "payload-null",
        "payload-not-json",
        "command-without-channel",
        "payload-nested-deep",
    ],
)
async def test_slack_signed_malformed_forms_are_400(
    slack_app: App, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture, form: str
) -> None:
    caplog.set_level(logging.WARNING)
    delivery = await deliver(events_url(slack_app), form, form=True)
    assert delivery.status == 400
    no_tracebacks(caplog)


@pytest.mark.parametrize("actions", [[{"type": "button", "value": "v"}], [], [5], "x", None])
async def test_slack_signed_block_actions_without_an_action_id_are_refused_cleanly(
    slack_app: App,
    slack: FakeSlack,
    llm: ScriptedLLM,
    caplog: pytest.LogCaptureFixture,
    actions: Any,
) -> None:
    caplog.set_level(logging.WARNING)
    payload = block_actions(user="U1", value="v", channel="C1", message_ts="1.1")
    payload["actions"] = actions
    form = "payload=" + quote(json.dumps(payload))
    delivery = await deliver(events_url(slack_app), form, form=True)
    assert delivery.status == 400
    await asyncio.sleep(0.3)
    assert llm.requests == [] and slack.calls_to("chat.postMessage") == []
    no_tracebacks(caplog)


async def test_slack_still_answers_after_malformed_requests(
    slack_app: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    url = events_url(slack_app)
    for body in SLACK_MALFORMED.values():
        assert (await deliver(url, body)).status == 400
    delivery = await deliver(url, json.dumps(event_callback(mention("still there?"))))
    assert delivery.status == 200
    await slack.wait_for("chat.postMessage")
    [post] = slack.calls_to("chat.postMessage")
    assert post["text"].endswith("still there?")
