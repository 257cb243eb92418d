"""Telegram updates (real PTB objects from Bot API JSON) to Inbound and ButtonPress."""

from __future__ import annotations

from typing import Any

from telegram import Update

from adapters.telegram.commands import menu
from adapters.telegram.normalize import BotIdentity, inbound_from, press_from
from gateway.sdk.messages import AttachmentKind, ChatKind, Inbound
from tests.fakes.telegram import FakeBotAPI

ME = BotIdentity(id=123456, username="gw_bot", commands=frozenset({"status", "help"}))
GROUP: dict[str, Any] = {"chat_id": -100777, "chat_type": "supergroup"}


def update(tg: FakeBotAPI, text: str | None = None, **kwargs: Any) -> Update:
    data = {"update_id": 77, "message": tg.message(text, **kwargs)}
    result = Update.de_json(data, None)
    assert result is not None
    return result


def inbound(tg: FakeBotAPI, text: str | None = None, **kwargs: Any) -> Inbound | None:
    normalized = inbound_from(update(tg, text, **kwargs), ME)
    return normalized.inbound if normalized else None


def test_dm() -> None:
    tg = FakeBotAPI()
    found = inbound_from(update(tg, "hello", username="Alice_X"), ME)
    assert found is not None and found.username == "alice_x"
    msg = found.inbound
    assert msg.event_id == "tg:77" and msg.text == "hello" and msg.mentioned
    assert msg.chat.kind is ChatKind.DIRECT and msg.chat.chat_id == "42"
    assert msg.sender.user_id == "42" and msg.sender.display_name == "Alice"


def test_group_mentions() -> None:
    tg = FakeBotAPI()
    plain = inbound(tg, "just chatting", **GROUP)
    assert plain is not None and not plain.mentioned and plain.chat.kind is ChatKind.GROUP
    assert plain.chat.chat_id == "-100777"
    mention = inbound(tg, "@GW_bot, what's up?", **GROUP)
    assert mention is not None and mention.mentioned and mention.text == "what's up?"
    other = inbound(tg, "ask @other_bot", **GROUP)
    assert other is not None and not other.mentioned
    text_mention = {"type": "text_mention", "offset": 0, "length": 2, "user": tg.me}
    named = inbound(tg, "Gw help", entities=[text_mention], **GROUP)
    assert named is not None and named.mentioned


def test_commands_for_us_and_for_others() -> None:
    tg = FakeBotAPI()
    ours = inbound(tg, "/status@gw_bot now", **GROUP)
    assert ours is not None and ours.text == "/status now" and ours.mentioned
    # A bare command of ours that Telegram delivered is for us; one we do not know may be
    # another bot's: it stays chatter, never an "unknown command" reply.
    bare = inbound(tg, "/status", **GROUP)
    assert bare is not None and bare.text == "/status" and bare.mentioned
    other = inbound(tg, "/weather Berlin", **GROUP)
    assert other is not None and other.text == "/weather Berlin" and not other.mentioned
    assert inbound(tg, "/status@other_bot", **GROUP) is None


def test_replies_and_forum_topics() -> None:
    tg = FakeBotAPI()
    bot_msg = {**tg.message("answer", **GROUP), "from": tg.me}
    to_bot = inbound(tg, "thanks", reply_to=bot_msg, **GROUP)
    assert to_bot is not None and to_bot.mentioned and to_bot.text == "thanks"
    bob = tg.message("the sky is green", user_id=7, first_name="Bob", **GROUP)
    quoting = inbound(tg, "@gw_bot true?", reply_to=bob, **GROUP)
    assert quoting is not None
    assert quoting.text == '[replying to Bob: "the sky is green"]\ntrue?'
    # In a forum every message "replies" to the topic's first message, which may be the bot's.
    root = {**tg.message(None, **GROUP), "from": tg.me, "forum_topic_created": {
        "name": "Ops", "icon_color": 1}}  # fmt: skip
    in_topic = inbound(tg, "hello topic", thread_id=root["message_id"], reply_to=root, **GROUP)
    assert in_topic is not None and not in_topic.mentioned
    assert in_topic.chat.thread_id == str(root["message_id"])
    # message_thread_id outside a forum marks a reply chain, not a topic.
    chain = tg.message("in a chain", **GROUP)
    chain["message_thread_id"] = 5
    parsed = Update.de_json({"update_id": 1, "message": chain}, None)
    assert parsed is not None
    found = inbound_from(parsed, ME)
    assert found is not None and found.inbound.chat.thread_id is None


def test_ignored_updates() -> None:
    tg = FakeBotAPI()
    assert inbound(tg, "beep", is_bot=True) is None
    assert inbound(tg, None) is None  # no text, no caption, no file: a service message
    # An edited command is not run again.
    command = Update.de_json({"update_id": 4, "edited_message": tg.message("/help")}, None)
    assert command is not None and inbound_from(command, ME) is None


def test_an_edit_names_the_message_it_edits() -> None:
    tg = FakeBotAPI()
    message = tg.message("x (fixed)")
    edited = Update.de_json({"update_id": 3, "edited_message": message}, None)
    assert edited is not None
    found = inbound_from(edited, ME)
    assert found is not None
    assert found.inbound.edit_of == found.inbound.message_id == str(message["message_id"])
    assert found.inbound.event_id == "tg:3" and found.inbound.text == "x (fixed)"


def test_attachments_and_captions() -> None:
    tg = FakeBotAPI()
    photos = [
        {"file_id": "p-big", "file_unique_id": "b", "width": 800, "height": 600, "file_size": 9},
        {"file_id": "p-small", "file_unique_id": "s", "width": 80, "height": 60, "file_size": 1},
    ]
    msg = inbound(tg, caption="@gw_bot look", photo=photos, **GROUP)
    assert msg is not None and msg.mentioned and msg.text == "look"
    [photo] = msg.attachments
    assert (photo.kind, photo.file_id, photo.size) == (AttachmentKind.IMAGE, "p-big", 9)
    doc = {"file_id": "d1", "file_unique_id": "d", "file_name": "a.csv", "mime_type": "text/csv"}
    only_file = inbound(tg, document=doc)
    assert only_file is not None and only_file.text == ""
    assert only_file.attachments[0].name == "a.csv"


def test_press() -> None:
    tg = FakeBotAPI()
    sent = {**tg.message("Pick", thread_id=4, **GROUP), "from": tg.me}
    query = {"id": "q1", "from": {"id": 7, "is_bot": False, "first_name": "Bob"},
             "chat_instance": "c", "data": "ap:1:once", "message": sent}  # fmt: skip
    parsed = Update.de_json({"update_id": 9, "callback_query": query}, None)
    assert parsed is not None
    press = press_from(parsed)
    assert press is not None and press.data == "ap:1:once" and press.event_id == "tg:9"
    assert press.chat.thread_id == "4" and press.user.user_id == "7"
    assert press.message is not None and press.message.message_id == str(sent["message_id"])


def test_menu_starts_with_start_and_drops_bad_names() -> None:
    commands = menu([("help", "show help"), ("Bad-Name", "x"), ("start", "dup")])
    assert [c.command for c in commands] == ["start", "help"]
