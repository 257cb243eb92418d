"""Slack payloads to the core's messages, Block Kit buttons, access lists, Retry-After."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.http_retry.response import HttpResponse

from adapters.slack.access import SlackAccess
from adapters.slack.blocks import message_blocks
from adapters.slack.normalize import (
    BotIdentity,
    button_press,
    command_text,
    event_inbound,
    is_ignored,
    slash_inbound,
)
from adapters.slack.sending import retry_after
from adapters.slack.settings import SlackSettings
from gateway.intake.access import NOT_ALLOWED
from gateway.sdk.messages import AttachmentKind, Button, ChatKind, ChatRef
from tests.fakes.slack import block_actions, mention, message, slash_command

BOT = BotIdentity(user_id="UBOT", bot_id="BBOT", team_id="T0TEAM")


def test_channel_mention_lives_in_its_thread() -> None:
    inbound = event_inbound(
        mention("deploy  it", ts="10.1"), event_id="Ev1", team_id="T1", bot=BOT, mentioned=True
    )
    assert inbound.text == "deploy it"
    assert inbound.chat == ChatRef(
        platform="slack", chat_id="C1", thread_id="10.1", kind=ChatKind.CHANNEL, space_id="T1"
    )
    assert (inbound.event_id, inbound.message_id, inbound.mentioned) == ("Ev1", "10.1", True)
    reply = mention("more", ts="10.5", thread_ts="10.1")
    inbound = event_inbound(reply, event_id="Ev2", team_id="T1", bot=BOT, mentioned=True)
    assert inbound.chat.thread_id == "10.1" and inbound.message_id == "10.5"


def test_dm_has_no_thread_unless_it_is_in_one() -> None:
    dm = event_inbound(message("hi"), event_id="E", team_id="T1", bot=BOT, mentioned=False)
    assert dm.chat.kind is ChatKind.DIRECT and dm.chat.thread_id is None and dm.mentioned
    threaded = message("hi", ts="5.2", thread_ts="5.1")
    dm = event_inbound(threaded, event_id="E", team_id="T1", bot=BOT, mentioned=False)
    assert dm.chat.thread_id == "5.1"


def test_files_become_attachments() -> None:
    files = [
        {"id": "F1", "name": "a.png", "mimetype": "image/png", "size": 10},
        {"id": "F2", "name": "r.pdf", "mimetype": "application/pdf"},
    ]
    event = message("", subtype="file_share", files=files)
    inbound = event_inbound(event, event_id="E", team_id="T1", bot=BOT, mentioned=True)
    assert [(a.kind, a.file_id) for a in inbound.attachments] == [
        (AttachmentKind.IMAGE, "F1"),
        (AttachmentKind.DOCUMENT, "F2"),
    ]
    assert not is_ignored(event, BOT)


@pytest.mark.parametrize(
    "extra",
    [
        {"subtype": "message_changed"},
        {"subtype": "message_deleted"},
        {"subtype": "channel_join"},
        {"subtype": "bot_message", "bot_id": "B2"},
        {"bot_id": "B2"},
        {"user": "UBOT"},
    ],
)
def test_ignored_events(extra: dict[str, Any]) -> None:
    assert is_ignored(message("x", **extra), BOT)


def test_plain_and_threaded_messages_are_input() -> None:
    assert not is_ignored(message("x"), BOT)
    assert not is_ignored(message("x", subtype="thread_broadcast"), BOT)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("new", "/new"),
        ("STATUS", "/status"),
        ("help me write a poem", "help me write a poem"),
        ("/stop", "/stop"),
        ("newsletter", "newsletter"),
    ],
)
def test_command_text(text: str, expected: str) -> None:
    assert command_text(text, {"new", "status", "help", "stop"}) == expected


def test_slash_inbound() -> None:
    inbound = slash_command("summarize &lt;this&gt;", channel="C7", user="U3")
    result = slash_inbound(inbound, {"new"})
    assert result.text == "summarize <this>" and result.mentioned
    assert result.chat == ChatRef(
        platform="slack", chat_id="C7", kind=ChatKind.CHANNEL, space_id="T0TEAM"
    )
    assert result.event_id == f"slash:{inbound['trigger_id']}" and result.sender.user_id == "U3"
    assert slash_inbound(slash_command("x", channel="D4"), ()).chat.kind is ChatKind.DIRECT


def test_button_press() -> None:
    body = block_actions(
        user="U2", value="ap:1:once", channel="C1", message_ts="7.2", thread_ts="7.1"
    )
    press = button_press(body)
    assert press is not None and press.data == "ap:1:once" and press.user.user_id == "U2"
    assert press.chat.thread_id == "7.1" and press.chat.space_id == "T0TEAM"
    assert press.message is not None and press.message.message_id == "7.2"
    # A button on a thread's parent message: the parent lives in the channel itself.
    parent = block_actions(user="U2", value="v", channel="C1", message_ts="7.1", thread_ts="7.1")
    pressed = button_press(parent)
    assert pressed is not None and pressed.chat.thread_id is None
    assert button_press({**body, "actions": []}) is None


def test_message_blocks() -> None:
    rows = (
        (Button(label="Yes", data="a:1", style="primary"), Button(label="No", data="a:2")),
        (Button(label="L" * 90, data="a:3", style="danger"),),
    )
    section, first, second = message_blocks("Proceed?", rows)
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": "Proceed?"}}
    assert [(e["action_id"], e["value"], e.get("style")) for e in first["elements"]] == [
        ("cg:0", "a:1", "primary"),
        ("cg:1", "a:2", None),
    ]
    label = second["elements"][0]["text"]["text"]
    assert second["elements"][0]["action_id"] == "cg:2" and len(label) == 75
    with pytest.raises(ValueError):
        message_blocks("x" * 3001, rows)


def test_access_lists() -> None:
    access = SlackAccess(
        SlackSettings(allowed_teams=["T1"], allowed_channels=["C1"], allowed_users=["U1"])
    )

    def chat(chat_id: str, team: str = "T1") -> ChatRef:
        kind = ChatKind.DIRECT if chat_id.startswith("D") else ChatKind.CHANNEL
        return ChatRef(platform="slack", chat_id=chat_id, kind=kind, space_id=team)

    assert access.refusal(chat("C1"), "U1") is None
    assert access.refusal(chat("D9"), "U1") is None  # DMs are not channel-restricted
    assert "workspace" in (access.refusal(chat("C1", "T2"), "U1") or "")
    assert "allowed_channels" in (access.refusal(chat("C2"), "U1") or "")
    assert access.refusal(chat("C1"), "U2") == NOT_ALLOWED
    assert SlackAccess(SlackSettings()).refusal(chat("C5", "T7"), "U7") is None


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"Retry-After": "3"}, 3.0),
        ({"retry-after": ["0.5"]}, 0.5),
        ({}, 1.0),
        ({"Retry-After": "x"}, 1.0),
    ],
)
def test_retry_after(headers: dict[str, Any], seconds: float) -> None:
    assert retry_after(HttpResponse(status_code=429, headers=headers)) == seconds
