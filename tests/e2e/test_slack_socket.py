"""Slack over Socket Mode: the real slack-bolt handler connects to the fake's WebSocket, acks
envelopes, and the gateway answers through the Web API (no HTTP server at all)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adapters.slack import SlackAdapter
from adapters.slack.socket_mode import SocketModeError
from gateway.app.app import App
from gateway.sdk.callbacks import CallbackData
from gateway.sdk.channels import ReportsState
from gateway.sdk.messages import Button, ButtonPress, ChatKind, ChatRef, Outbound, PressReply
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.slack import (
    APP_TOKEN,
    BOT_TOKEN,
    FakeSlack,
    block_actions,
    event_callback,
    mention,
    slack_gateway,
    slash_command,
)
from tests.harness import gateway_settings

pytestmark = pytest.mark.e2e


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> AsyncIterator[App]:
    settings = gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        # See test_slack_events.py: the scheduler is not under test here.
        scheduler={"enabled": False},
        slack={"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "api_url": slack.api_url},
    )
    async with slack_gateway(settings) as app:
        yield app


async def test_socket_mode_round_trip(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    assert gw.http is None and slack.connections == 1
    adapter = gw.outbox.adapter("slack")
    assert isinstance(adapter, ReportsState)
    assert await adapter.state() == "connected (Socket Mode)"
    opened = [c for c in slack.calls if c.method == "apps.connections.open"]
    assert [c.token for c in opened] == [APP_TOKEN]
    llm.push(Reply.text("Pong.", delay=0.5))
    envelope = await slack.push("events_api", event_callback(mention("ping", ts="1000.000100")))
    ack = await slack.wait_for_ack(envelope, seconds=0.4)  # acked before the turn ends
    assert ack == {"envelope_id": envelope}
    posted = await slack.wait_for_post("Pong.")
    assert posted["channel"] == "C1" and posted["thread_ts"] == "1000.000100"
    assert last_user_text(llm.requests[0]) == "U1: ping"


async def test_socket_mode_redelivery_processed_once(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    body = event_callback(mention("once", ts="1000.000100"), event_id="Ev0SOCKET")
    first = await slack.push("events_api", body)
    again = await slack.push("events_api", body, retry_attempt=1)
    await slack.wait_for_ack(first)
    await slack.wait_for_ack(again)
    await slack.wait_for_post("echo: U1: once")
    await asyncio.sleep(0.3)
    assert len(llm.requests) == 1 and len(slack.calls_to("chat.postMessage")) == 1


async def test_socket_mode_slash_command(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    envelope = await slack.push("slash_commands", dict(slash_command("status report")))
    ack = await slack.wait_for_ack(envelope)
    assert ack["payload"] == {"text": "Working on it…"}
    posted = await slack.wait_for_post("echo: U1: status report")
    assert posted["channel"] == "C1" and posted.get("thread_ts") is None


@dataclass(frozen=True)
class Pick(CallbackData, prefix="pick"):
    """The test's own buttons: `pick:<value>`."""

    value: str


async def test_socket_mode_button(gw: App, slack: FakeSlack) -> None:
    async def on_press(press: ButtonPress, data: Pick) -> PressReply:
        return PressReply(toast="Chosen.", edit_text=f"You chose {press.data.split(':')[-1]}.")

    gw.extensions.add_buttons(Pick, on_press)
    chat = ChatRef(platform="slack", chat_id="D1", kind=ChatKind.DIRECT)
    buttons = ((Button(label="Red", data="pick:red"), Button(label="Blue", data="pick:blue")),)
    ref = await gw.outbox.send(Outbound(chat=chat, text="Pick one", buttons=buttons))
    payload = block_actions(user="U1", value="pick:blue", channel="D1", message_ts=ref.message_id)
    envelope = await slack.push("interactive", payload)
    assert (await slack.wait_for_ack(envelope)) == {"envelope_id": envelope}
    update = (await slack.wait_for("chat.update"))[0]
    assert (update["channel"], update["ts"], update["text"]) == (
        "D1",
        ref.message_id,
        "You chose blue.",
    )


async def test_refused_app_token_fails_the_start(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack
) -> None:
    slack.fail("apps.connections.open", "invalid_auth")
    settings = gateway_settings(
        tmp_path,
        llm.url,
        slack={"bot_token": BOT_TOKEN, "app_token": "xapp-wrong", "api_url": slack.api_url},
    )
    app = App(settings)
    app.add_configured_adapters()
    adapter = app.outbox.adapter("slack")
    assert isinstance(adapter, SlackAdapter)
    with pytest.raises(SocketModeError, match="invalid_auth"):
        await adapter.start()
    await app.store.close()
    await app.llm.aclose()
