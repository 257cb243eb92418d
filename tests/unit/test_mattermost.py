"""Mattermost's pure parts: posts into Inbounds (mentions, threads, files), slash commands,
the per-button secrets, and the access rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.mattermost.access import NO_DMS, NOT_HERE, MattermostAccess
from adapters.mattermost.buttons import ActionSigner, button_props
from adapters.mattermost.normalize import (
    BotIdentity,
    NotAPost,
    SlashCommand,
    attachments,
    clean_text,
    command_inbound,
    is_ignored,
    is_mentioned,
    post_chat,
    posted_post,
)
from adapters.mattermost.settings import MattermostSettings
from gateway.sdk import NOT_ALLOWED, AttachmentKind, Button, ChatKind, ChatRef, UserRef

BOT = BotIdentity(user_id="bot1", username="chatgate")


def post(**fields: Any) -> dict[str, Any]:
    return {
        "id": "p1",
        "channel_id": "c1",
        "user_id": "u1",
        "root_id": "",
        "message": "hi",
        **fields,
    }


def test_a_posted_event_carries_its_post_as_json_text() -> None:
    assert posted_post({"post": json.dumps(post())})["id"] == "p1"
    for bad in ({}, {"post": "{not json"}, {"post": "[1]"}, {"post": json.dumps(post(id=""))}):
        with pytest.raises(NotAPost):
            posted_post(bad)
    with pytest.raises(NotAPost):
        posted_post({"post": json.dumps(post(message=["x"]))})


def test_mentions_by_id_list_or_by_name_and_the_text_without_them() -> None:
    assert is_mentioned(post(), {"mentions": json.dumps(["bot1"])}, BOT)
    assert is_mentioned(post(message="hey @ChatGate, look"), {}, BOT)
    assert not is_mentioned(post(message="mail me at x@chatgate.io or @chatgatefan"), {}, BOT)
    assert not is_mentioned(post(), {"mentions": "not json"}, BOT)
    assert clean_text("@chatgate  what   now? ask @bob", BOT) == "what now? ask @bob"


def test_system_posts_own_posts_and_integrations_are_not_input() -> None:
    assert not is_ignored(post(), BOT)
    assert is_ignored(post(type="system_join_channel"), BOT)
    assert is_ignored(post(user_id="bot1"), BOT)
    assert is_ignored(post(props={"from_webhook": "true"}), BOT)
    assert is_ignored(post(props={"from_bot": "true"}), BOT)


def test_where_a_post_is_answered() -> None:
    dm = post_chat(post(), "D", "", reply_in_thread=True)
    assert (dm.kind, dm.thread_id, dm.space_id) == (ChatKind.DIRECT, None, None)
    in_dm_thread = post_chat(post(root_id="r1"), "D", "", reply_in_thread=True)
    assert in_dm_thread.thread_id == "r1"
    channel = post_chat(post(), "O", "t1", reply_in_thread=True)
    assert (channel.kind, channel.thread_id, channel.space_id) == (ChatKind.CHANNEL, "p1", "t1")
    assert post_chat(post(), "P", "t1", reply_in_thread=False).thread_id is None
    assert post_chat(post(root_id="r1"), "O", "t1", reply_in_thread=False).thread_id == "r1"
    assert post_chat(post(), "G", "", reply_in_thread=False).kind is ChatKind.GROUP


def test_files_from_metadata_and_bare_file_ids() -> None:
    info = {"id": "f1", "name": "a.png", "size": 10, "mime_type": "image/png"}
    found = attachments(post(file_ids=["f1", "f2"], metadata={"files": [info, "junk"]}))
    assert [(a.file_id, a.kind, a.name, a.size) for a in found] == [
        ("f1", AttachmentKind.IMAGE, "a.png", 10),
        ("f2", AttachmentKind.OTHER, None, None),
    ]


def test_slash_commands_and_chat_commands() -> None:
    form = {
        "channel_id": "c1",
        "user_id": "u1",
        "trigger_id": "t1",
        "text": "new",
        "user_name": "al",
    }
    command = SlashCommand.parse(form)
    inbound = command_inbound(command, ChatKind.CHANNEL, {"new", "stop"})
    assert inbound.text == "/new" and inbound.event_id == "mm:cmd:t1"
    asked = command_inbound(
        SlashCommand.parse({**form, "text": "newest news?"}), ChatKind.DIRECT, {"new"}
    )
    assert asked.text == "newest news?" and asked.chat.kind is ChatKind.DIRECT
    with pytest.raises(ValueError, match="trigger_id"):
        SlashCommand.parse({**form, "trigger_id": ""})


CHAT = ChatRef(platform="mattermost", chat_id="c1", thread_id="r1", kind=ChatKind.CHANNEL)


def test_a_button_secret_verifies_only_unchanged_and_in_its_channel() -> None:
    signer = ActionSigner.from_settings("", "token-a")
    context = signer.context("t:1:yes", CHAT)
    signed = signer.verify(context, "c1")
    assert signed is not None and signed.data == "t:1:yes" and signed.chat == CHAT
    assert signer.verify(context, "c2") is None  # pressed in another channel
    assert signer.verify({**context, "data": "t:1:no"}, "c1") is None
    assert signer.verify({**context, "thread": ""}, "c1") is None
    assert signer.verify({**context, "secret": None}, "c1") is None
    assert signer.verify("context", "c1") is None
    assert ActionSigner.from_settings("", "token-b").verify(context, "c1") is None
    assert ActionSigner.from_settings("configured", "token-a").verify(context, "c1") is None


def test_buttons_become_attachment_actions_pointing_at_the_gateway() -> None:
    signer = ActionSigner.from_settings("k", "t")
    rows = (
        (Button(label="Yes", data="t:1:yes", style="primary"), Button(label="No", data="t:1:no")),
    )
    props = button_props(rows, CHAT, signer, "https://gw.example.com/")
    [attachment] = props["attachments"]
    yes, no = attachment["actions"]
    assert (yes["id"], yes["name"], yes["style"], no["style"]) == (
        "cg0",
        "Yes",
        "primary",
        "default",
    )
    tag = signer.url_tag()
    assert yes["integration"]["url"] == f"https://gw.example.com/mattermost/actions/{tag}"
    assert len(tag) == 32 and tag != ActionSigner.from_settings("other", "t").url_tag()
    assert signer.verify(no["integration"]["context"], "c1") is not None


def test_access_rules() -> None:
    alice = UserRef(platform="mattermost", user_id="alice")
    bob = UserRef(platform="mattermost", user_id="bob")
    dm = ChatRef(platform="mattermost", chat_id="d1", kind=ChatKind.DIRECT)
    town = ChatRef(platform="mattermost", chat_id="town", kind=ChatKind.CHANNEL)
    other = ChatRef(platform="mattermost", chat_id="other", kind=ChatKind.CHANNEL)
    access = MattermostAccess(
        MattermostSettings(allowed_channels=["town"], allowed_users=["alice"], allow_dms=False)
    )
    assert access.reason(town, alice) is None
    assert access.reason(other, alice) == NOT_HERE
    assert access.reason(town, bob) == NOT_ALLOWED
    assert access.reason(dm, alice) == NO_DMS
    assert access.reason(ChatRef(platform="slack", chat_id="x"), bob) is None
