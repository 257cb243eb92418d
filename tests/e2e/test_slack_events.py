"""Slack over the HTTP Events API: the real slack-bolt inside the real gateway, against a fake
Slack Web API, the scripted LLM and a private redis-server."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from adapters.slack import SlackAdapter, SlackStartError
from gateway.app.app import App
from gateway.config import Settings
from gateway.sdk.callbacks import CallbackData
from gateway.sdk.channels import DeliveryError
from gateway.sdk.messages import Button, ButtonPress, ChatKind, ChatRef, Outbound, PressReply
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.slack import (
    BOT_TOKEN,
    BOT_USER,
    SECRET,
    TEAM,
    FakeSlack,
    block_actions,
    deliver,
    event_callback,
    events_url,
    form_body,
    mention,
    message,
    payload_body,
    slack_gateway,
    slash_command,
)
from tests.harness import gateway_settings

pytestmark = pytest.mark.e2e


def settings_for(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeSlack,
    redis_url: str,
    *,
    slack: dict[str, Any] | None = None,
    **sections: Any,
) -> Settings:
    return gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        http={"enabled": True, "port": 0},
        # Not under test here, and its leader election can hang App.stop() when the stop lands
        # on its first Redis call (a swallowed cancel; reported to the lead).
        scheduler={"enabled": False},
        slack={
            "bot_token": BOT_TOKEN,
            "signing_secret": SECRET,
            "api_url": fake.api_url,
            **(slack or {}),
        },
        **sections,
    )


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> AsyncIterator[App]:
    async with slack_gateway(settings_for(tmp_path, llm, slack, redis_url)) as app:
        yield app


async def post_event(app: App, event: dict[str, Any], **kwargs: Any) -> int:
    delivery = await deliver(events_url(app), json.dumps(event_callback(event, **kwargs)))
    return delivery.status


def adapter(app: App) -> SlackAdapter:
    found = app.outbox.adapter("slack")
    assert isinstance(found, SlackAdapter)
    return found


async def test_mention_answered_in_its_thread(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("**Done**: see [the docs](https://x.test/?a=1&b=2) & <notes>", delay=1.5))
    body = json.dumps(event_callback(mention("hello", ts="1000.000100")))
    delivery = await deliver(events_url(gw), body)
    # Acked long before the 1.5 s turn ends.
    assert delivery.status == 200 and delivery.seconds < 1.0
    posted = (await slack.wait_for("chat.postMessage"))[0]
    assert posted["channel"] == "C1" and posted["thread_ts"] == "1000.000100"
    assert (
        posted["text"] == "*Done*: see <https://x.test/?a=1&amp;b=2|the docs> &amp; &lt;notes&gt;"
    )
    assert last_user_text(llm.requests[0]) == "U1: hello"
    # The working indicator: a reaction on the message, taken off once the answer is out.
    await slack.wait_for("reactions.remove")
    assert slack.methods("reactions.add", "chat.postMessage", "reactions.remove") == [
        "reactions.add",
        "chat.postMessage",
        "reactions.remove",
    ]
    added = slack.calls_to("reactions.add")[0]
    assert (added["channel"], added["timestamp"], added["name"]) == (
        "C1",
        "1000.000100",
        "hourglass_flowing_sand",
    )


async def test_dm_answered_in_the_conversation(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    assert await post_event(gw, message("my name is Ana", ts="2000.000100")) == 200
    first = (await slack.wait_for("chat.postMessage"))[0]
    assert first["channel"] == "D1" and first.get("thread_ts") is None
    assert first["text"] == "echo: my name is Ana"
    assert await post_event(gw, message("who am I?", ts="2000.000200")) == 200
    await slack.wait_for_post("echo: who am I?")
    # One session for the DM: the second turn sees the first exchange.
    contents = [m.get("content") for m in llm.requests[1]["messages"]]
    assert contents[-3:] == ["my name is Ana", "echo: my name is Ana", "who am I?"]


async def test_bot_messages_edits_and_own_posts_are_ignored(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    for event in (
        message("from a bot", bot_id="B9", subtype="bot_message"),
        message("my own post", user=BOT_USER),
        message("edited", subtype="message_changed"),
        message("deleted", subtype="message_deleted"),
    ):
        assert await post_event(gw, event) == 200
    await asyncio.sleep(0.4)
    assert llm.requests == [] and slack.calls_to("chat.postMessage") == []


async def test_thread_follow_up_needs_a_mention_by_default(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    await post_event(gw, mention("plan the release", ts="1000.000100"))
    await slack.wait_for("chat.postMessage")
    follow_up = message("and the changelog?", channel="C1", ts="1000.000200")
    follow_up["thread_ts"] = "1000.000100"
    await post_event(gw, follow_up)
    await asyncio.sleep(0.4)
    assert len(llm.requests) == 1  # kept as context, not answered
    await post_event(gw, mention("summarize", ts="1000.000300", thread_ts="1000.000100"))
    await llm.wait_for_requests(2)
    user_text = last_user_text(llm.requests[1])
    second = (await slack.wait_for("chat.postMessage", 2))[1]
    assert second["thread_ts"] == "1000.000100"
    assert "U1: and the changelog?" in user_text and user_text.endswith("U1: summarize")
    assert '<untrusted-data source="chat messages">' in user_text  # others' words are data
    # Same thread, same session: the first exchange is in the history.
    assert "U1: plan the release" in [m.get("content") for m in llm.requests[1]["messages"]]


async def test_thread_follow_up_answered_when_configured(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> None:
    settings = settings_for(tmp_path, llm, slack, redis_url, slack={"thread_followups": True})
    async with slack_gateway(settings) as gw:
        await post_event(gw, mention("plan the release", ts="1000.000100"))
        await slack.wait_for("chat.postMessage")
        follow_up = message("and the changelog?", channel="C1", ts="1000.000200")
        await post_event(gw, {**follow_up, "thread_ts": "1000.000100"})
        second = await slack.wait_for_post("echo: U1: and the changelog?")
        assert second["thread_ts"] == "1000.000100"
        # A thread the bot never answered, and the message event twin of a mention: ignored.
        stranger = message("unrelated", channel="C1", ts="3000.000200")
        await post_event(gw, {**stranger, "thread_ts": "3000.000100"})
        twin = message(f"<@{BOT_USER}> plan the release", channel="C1", ts="1000.000100")
        await post_event(gw, twin)
        await asyncio.sleep(0.4)
        assert len(llm.requests) == 2


async def test_retry_processed_once_across_replicas(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> None:
    shared = {"redis": {"url": redis_url, "key_prefix": f"slack-{tmp_path.name[-8:]}"}}
    first = settings_for(tmp_path / "a", llm, slack, "", **shared)
    second = settings_for(tmp_path / "b", llm, slack, "", **shared)
    body = json.dumps(event_callback(mention("deploy?", ts="1000.000100"), event_id="Ev0RETRY"))
    async with slack_gateway(first) as a, slack_gateway(second) as b:
        original = await deliver(events_url(a), body)
        retry = await deliver(
            events_url(b),
            body,
            headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
        )
        again = await deliver(events_url(a), body, headers={"X-Slack-Retry-Num": "2"})
        assert (original.status, retry.status, again.status) == (200, 200, 200)
        await slack.wait_for("chat.postMessage")
        await asyncio.sleep(0.4)
    assert len(llm.requests) == 1 and len(slack.calls_to("chat.postMessage")) == 1


@pytest.mark.parametrize(
    "problem",
    [
        {"headers": {"X-Slack-Signature": "v0=" + "0" * 64}},
        {"secret": "some-other-secret"},
        {"timestamp": 1_000_000_000},  # 2001: far older than five minutes
        {"signed": False},
    ],
    ids=["bad-signature", "wrong-secret", "stale-timestamp", "unsigned"],
)
async def test_unverified_requests_refused(
    gw: App, slack: FakeSlack, llm: ScriptedLLM, problem: dict[str, Any]
) -> None:
    body = json.dumps(event_callback(mention("rm -rf /")))
    delivery = await deliver(events_url(gw), body, **problem)
    assert delivery.status == 401
    await asyncio.sleep(0.3)
    assert llm.requests == []
    assert slack.calls_to("chat.postMessage") == [] and slack.calls_to("reactions.add") == []


async def test_url_verification_answered(gw: App) -> None:
    body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"})
    delivery = await deliver(events_url(gw), body)
    assert delivery.status == 200 and delivery.json() == {"challenge": "c-123"}


async def test_slash_command(
    tmp_path: Path, slack: FakeSlack, llm: ScriptedLLM, redis_url: str
) -> None:
    # /new in a channel is for admins: it resets everyone's conversation there.
    settings = settings_for(tmp_path, llm, slack, redis_url, access={"admins": ["slack:U1"]})
    async with slack_gateway(settings) as gw:
        await _slash_command(gw, slack, llm)


async def _slash_command(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("Here is the summary.", delay=0.5))
    delivery = await deliver(
        events_url(gw), form_body(slash_command("summarize the plan")), form=True
    )
    assert delivery.status == 200 and delivery.seconds < 0.5
    assert delivery.text == "Working on it…"  # a plain-text ack is shown only to the caller
    posted = (await slack.wait_for("chat.postMessage"))[0]
    assert posted["channel"] == "C1" and posted.get("thread_ts") is None
    assert posted["text"] == "Here is the summary."
    assert last_user_text(llm.requests[0]) == "U1: summarize the plan"
    # A lone command word runs the gateway's command.
    await deliver(events_url(gw), form_body(slash_command("new")), form=True)
    reset = (await slack.wait_for("chat.postMessage", 2))[1]
    assert reset["text"].startswith("Started a new conversation")
    assert len(llm.requests) == 1


@dataclass(frozen=True)
class Choice(CallbackData, prefix="t"):
    """The test's own buttons: `t:<item>:<answer>`."""

    item: str
    answer: str


async def test_button_round_trip_with_refusal(gw: App, slack: FakeSlack) -> None:
    presses: list[ButtonPress] = []

    async def on_press(press: ButtonPress, data: Choice) -> PressReply:
        presses.append(press)
        if press.user.user_id != "U1":
            return PressReply(toast="Only U1 can approve this.", alert=True)
        return PressReply(toast="Approved.", edit_text=f"Deploy approved by {press.user.label}.")

    gw.extensions.add_buttons(Choice, on_press)
    chat = ChatRef(platform="slack", chat_id="C1", thread_id="1000.000100", kind=ChatKind.CHANNEL)
    buttons = (
        Button(label="Approve", data="t:42:yes", style="primary"),
        Button(label="Deny", data="t:42:no", style="danger"),
    )
    ref = await gw.outbox.send(Outbound(chat=chat, text="Deploy `v2` now?", buttons=(buttons,)))
    posted = slack.calls_to("chat.postMessage")[0]
    assert posted["thread_ts"] == "1000.000100" and posted["text"] == "Deploy `v2` now?"
    section, actions = posted["blocks"]
    assert section["text"] == {"type": "mrkdwn", "text": "Deploy `v2` now?"}
    assert [(e["action_id"], e["value"], e.get("style")) for e in actions["elements"]] == [
        ("cg:0", "t:42:yes", "primary"),
        ("cg:1", "t:42:no", "danger"),
    ]

    async def press(user: str) -> int:
        payload = block_actions(
            user=user,
            value="t:42:yes",
            channel="C1",
            message_ts=ref.message_id,
            thread_ts="1000.000100",
        )
        return (await deliver(events_url(gw), payload_body(payload), form=True)).status

    assert await press("U2") == 200
    refusal = (await slack.wait_for("chat.postEphemeral"))[0]
    assert refusal["user"] == "U2" and refusal["text"] == "Only U1 can approve this."
    assert refusal["thread_ts"] == "1000.000100"
    assert slack.calls_to("chat.update") == []  # the message keeps its buttons

    assert await press("U1") == 200
    update = (await slack.wait_for("chat.update"))[0]
    assert (update["channel"], update["ts"]) == ("C1", ref.message_id)
    assert update["text"] == "Deploy approved by U1."
    assert [b["type"] for b in update["blocks"]] == ["section"]  # buttons removed
    assert presses[1].chat == chat.model_copy(update={"space_id": TEAM})
    assert presses[1].message is not None and presses[1].message.message_id == ref.message_id


class _Command(BaseModel):
    command: str


async def test_approval_round_trip(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    ran: list[str] = []

    async def run(args: _Command, ctx: ToolContext) -> str:
        ran.append(args.command)
        return f"ran {args.command}: ok"

    async def needs(args: _Command, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(summary=args.command, reason="it deletes files", shape=args.command)

    gw.tools.register(ToolSpec("danger", "runs things", _Command, run, "test", needs))
    llm.push(Reply.call("danger", command="rm -rf build"), Reply.text("Cleaned up."))
    await post_event(gw, mention("clean the build", ts="1000.000100"))
    prompt = await slack.wait_for_buttons()
    assert prompt.params["thread_ts"] == "1000.000100"
    approve = next(
        e["value"]
        for b in prompt.params["blocks"]
        if b["type"] == "actions"
        for e in b["elements"]
        if e["text"]["text"] == "Approve once"
    )

    async def press(user: str) -> None:
        payload = block_actions(
            user=user,
            value=approve,
            channel="C1",
            message_ts=prompt.result["ts"],
            thread_ts="1000.000100",
        )
        assert (await deliver(events_url(gw), payload_body(payload), form=True)).status == 200

    await press("U2")  # not the requester, not an admin
    refusal = (await slack.wait_for("chat.postEphemeral"))[0]
    assert refusal["user"] == "U2" and refusal["text"].startswith("Only U1")
    assert slack.calls_to("chat.update") == [] and ran == []

    await press("U1")
    answer = await slack.wait_for_answer("Cleaned up.")
    assert (answer.channel, answer.thread_ts) == ("C1", "1000.000100")
    assert ran == ["rm -rf build"]
    update = (await slack.wait_for("chat.update"))[0]
    assert update["ts"] == prompt.result["ts"]
    assert not any(b["type"] == "actions" for b in update["blocks"])


async def test_long_reply_split_in_the_thread(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    paragraphs = [f"Paragraph {n}: " + "lorem ipsum dolor " * 30 for n in range(25)]
    llm.push(Reply.text("\n\n".join(paragraphs)))
    await post_event(gw, mention("write a lot", ts="1000.000100"))
    await slack.wait_for("reactions.remove")
    parts = slack.calls_to("chat.postMessage")
    assert len(parts) >= 5
    assert all(len(p["text"]) <= 3000 and p["thread_ts"] == "1000.000100" for p in parts)
    assert parts[0]["text"].endswith(f"(1/{len(parts)})")
    joined = "\n".join(p["text"] for p in parts)
    assert all(f"Paragraph {n}:" in joined for n in range(25))
    assert len(slack.calls_to("reactions.remove")) == 1


async def test_rate_limit_honoured(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    slack.fail("chat.postMessage", "ratelimited", status=429, headers={"Retry-After": "1"})
    await post_event(gw, mention("hi", ts="1000.000100"))
    await slack.wait_for("chat.postMessage", 2, seconds=8)
    first, second = [c for c in slack.calls if c.method == "chat.postMessage"]
    assert second.at - first.at >= 1.0
    assert second.params["text"] == "echo: U1: hi"


async def test_permanent_errors_raise_and_are_logged(
    gw: App, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    slack.fail("chat.postMessage", "not_in_channel")
    chat = ChatRef(platform="slack", chat_id="C9", kind=ChatKind.CHANNEL)
    with caplog.at_level(logging.ERROR), pytest.raises(DeliveryError) as raised:
        await adapter(gw).send(Outbound(chat=chat, text="hello"))
    assert raised.value.permanent
    assert "error=not_in_channel" in caplog.text and "/invite" in caplog.text
    assert BOT_TOKEN not in caplog.text


async def test_rate_limit_longer_than_allowed_fails_fast(gw: App, slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", "ratelimited", status=429, headers={"Retry-After": "600"})
    chat = ChatRef(platform="slack", chat_id="C1", kind=ChatKind.CHANNEL)
    with pytest.raises(DeliveryError, match="ratelimited") as raised:
        await asyncio.wait_for(adapter(gw).send(Outbound(chat=chat, text="hi")), 2)
    assert not raised.value.permanent


async def test_refused_bot_token_fails_the_start(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack
) -> None:
    slack.fail("auth.test", "invalid_auth")
    app = App(settings_for(tmp_path, llm, slack, ""))
    app.add_configured_adapters()
    with pytest.raises(SlackStartError, match=r"invalid_auth.*CHATGATE_SLACK__BOT_TOKEN"):
        await adapter(app).start()
    await app.store.close()
    await app.llm.aclose()


async def test_channel_not_allowed_is_refused(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> None:
    settings = settings_for(tmp_path, llm, slack, redis_url, slack={"allowed_channels": ["C1"]})
    async with slack_gateway(settings) as gw:
        await post_event(gw, mention("hello", channel="C2", ts="1000.000100"))
        refusal = (await slack.wait_for("chat.postMessage"))[0]
        assert refusal["channel"] == "C2" and "slack.allowed_channels" in refusal["text"]
        await post_event(gw, mention("hello", channel="C1", ts="1000.000200"))
        await slack.wait_for("chat.postMessage", 2)
    assert len(llm.requests) == 1
