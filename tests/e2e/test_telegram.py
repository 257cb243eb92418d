"""Telegram end to end: the real python-telegram-bot inside the real gateway, against the fake
Bot API in tests/fakes/telegram.py, with the scripted LLM and a real redis-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from adapters.telegram import AttachmentTooLarge, TelegramAdapter, TelegramStartError
from gateway.app.app import App
from gateway.intake.access import NOT_ALLOWED
from gateway.sdk.callbacks import CallbackData
from gateway.sdk.channels import DeliveryError
from gateway.sdk.extensions import EXPIRED_BUTTON
from gateway.sdk.messages import (
    Button,
    ButtonPress,
    ChatKind,
    ChatRef,
    Outbound,
    PressReply,
    SentRef,
)
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from gateway.store import keys
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.telegram import Call, FakeBotAPI, parse_html, utf16_len
from tests.harness import eventually, gateway_settings
from tests.media_samples import image_parts, jpeg

GROUP = -1001234567890
SECRET = "s3cret-Token_value"


@contextlib.asynccontextmanager
async def telegram_gateway(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, redis_url: str = "", **sections: Any
) -> AsyncIterator[App]:
    """The real App with the Telegram adapter configured, as `chatgate run` builds it."""
    telegram = {"token": tg.token, "api_url": tg.url, "poll_timeout": 1}
    telegram.update(sections.pop("telegram", {}))
    sections.setdefault("router", {"typing_delay": 0.8})  # the production default
    settings = gateway_settings(
        tmp_path, llm.url, redis_url=redis_url, telegram=telegram, **sections
    )
    app = App(settings)
    assert app.add_configured_adapters() == ["telegram"]
    await app.start()
    try:
        yield app
    finally:
        await app.stop()


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, redis_url: str
) -> AsyncIterator[App]:
    async with telegram_gateway(tmp_path, llm, tg, redis_url) as app:
        yield app


def adapter(app: App) -> TelegramAdapter:
    found = app.outbox.adapter("telegram")
    assert isinstance(found, TelegramAdapter)
    return found


def group_chat(thread: int | None = None) -> ChatRef:
    topic = str(thread) if thread else None
    return ChatRef(platform="telegram", chat_id=str(GROUP), kind=ChatKind.GROUP, thread_id=topic)


async def quiet(seconds: float = 0.3) -> None:
    """Give the gateway time to (not) answer something."""
    await asyncio.sleep(seconds)


# -- DMs, groups, topics ---------------------------------------------------------------------


async def test_dm_round_trip(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    llm.push(Reply.text("Hello, **Alice** & co <3"))
    tg.push_message("hi there")
    [reply] = await tg.wait_sent(1)
    assert reply.params["chat_id"] == 42
    assert reply.text == "Hello, <b>Alice</b> &amp; co &lt;3"
    assert reply.params["parse_mode"] == "HTML"
    assert "reply_parameters" not in reply.params  # no quote of the question in a DM
    assert last_user_text(llm.requests[0]) == "hi there"
    # The commands menu, and nothing per message beyond sendMessage (typing waits 0.8 s).
    names = [c["command"] for c in tg.commands]
    assert names[0] == "start"
    assert {"help", "new", "stop", "status", "memory", "forget"} <= set(names)
    assert [c.method for c in tg.calls] == [
        "getMe",
        "setMyCommands",
        "deleteWebhook",
        "sendMessage",
    ]
    assert tg.polls[0].params["allowed_updates"] == ["message", "edited_message", "callback_query"]


async def test_the_console_state_follows_polling(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    found = adapter(gw)
    await eventually(lambda: found.polling, what="the only replica polls")
    assert await found.state() == "polling"
    tg.fail("getUpdates", 409, "Conflict: terminated by other getUpdates request", times=1)
    retrying = "polling, retrying (getUpdates failed: Conflict: terminated by other getUpdates"
    for _ in range(250):
        state = await found.state()
        if state.startswith(retrying):
            break
        await asyncio.sleep(0.02)
    assert state.startswith(retrying), state
    llm.push(Reply.text("Still here."))
    tg.push_message("after the conflict")
    await tg.wait_sent(1, within=10)  # the next getUpdates succeeded
    assert await found.state() == "polling"


async def test_group_needs_mention_and_keeps_context(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    group = {"chat_id": GROUP, "chat_type": "supergroup"}
    tg.push_message("lunch at noon?", user_id=7, first_name="Bob", username="bob", **group)
    await quiet()
    assert tg.sent() == [] and llm.requests == []
    update = tg.push_message("@gw_bot what did Bob ask?", **group)
    [reply] = await tg.wait_sent(1)
    asked = tg.pushed[update]["message"]
    assert reply.params["reply_parameters"]["message_id"] == asked["message_id"]
    content = last_user_text(llm.requests[0])
    # Other people's words are marked as outside content.
    assert (
        '[Recent messages in this chat, for context]\n<untrusted-data source="chat messages">\n'
        "Bob: lunch at noon?\n</untrusted-data>"
    ) in content
    assert content.endswith("Alice: what did Bob ask?")  # the mention itself is dropped


async def test_text_mention_and_reply_to_bot_are_answered(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    group = {"chat_id": GROUP, "chat_type": "supergroup"}
    mention = {"type": "text_mention", "offset": 0, "length": 7, "user": tg.me}
    tg.push_message("Gateway, status?", entities=[mention], **group)
    [first] = await tg.wait_sent(1)
    bot_message = first.result
    # A reply to someone else's message is not addressed to the bot...
    bob = tg.message("I disagree", chat_id=GROUP, chat_type="supergroup", user_id=7)
    tg.push_message("me too", reply_to=bob, **group)
    await quiet()
    assert len(tg.sent()) == 1
    # ...but a reply to the bot's own message is.
    tg.push_message("and now?", reply_to=bot_message, **group)
    await tg.wait_sent(2)
    assert [last_user_text(r) for r in llm.requests][-1].endswith("Alice: and now?")


async def test_forum_topics_are_separate_sessions(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    forum = {"chat_id": GROUP, "chat_type": "supergroup"}
    tg.push_message("@gw_bot my name is Ann", thread_id=11, **forum)
    await tg.wait_sent(1)
    tg.push_message("@gw_bot what is my name?", thread_id=22, **forum)
    await tg.wait_sent(2)
    tg.push_message("@gw_bot and here?", thread_id=11, **forum)
    sent = await tg.wait_sent(3)
    assert [s.params.get("message_thread_id") for s in sent] == [11, 22, 11]
    topic_22 = [m.get("content") for m in llm.requests[1]["messages"]]
    topic_11 = [m.get("content") for m in llm.requests[2]["messages"]]
    assert not any("my name is Ann" in str(c) for c in topic_22)
    assert any("my name is Ann" in str(c) for c in topic_11)


async def test_bots_are_ignored_and_a_late_edit_is_a_message_of_its_own(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    tg.push_message("I am a bot", user_id=999, is_bot=True)
    tg.push_message("a person")
    [reply] = await tg.wait_sent(1)
    await quiet()
    assert reply.text == "echo: a person" and len(tg.sent()) == 1
    # An edit of a message whose turn is over follows as a message that says it is an edit.
    edited = tg.message("hi (edited)")
    tg.push_update({"edited_message": {**edited, "edit_date": int(time.time())}})
    await tg.wait_sent(2)
    assert [last_user_text(r) for r in llm.requests] == [
        "a person",
        "[Edited an earlier message to:] hi (edited)",
    ]


async def test_message_right_after_an_answer_gets_no_queue_notice(gw: App, tg: FakeBotAPI) -> None:
    # The person answers the moment the reply arrives, while the turn still saves history:
    # the message waits a few milliseconds, which is not worth "I will answer this after...".
    def reply_at_once(call: Call) -> None:
        if call.method == "sendMessage" and call.params["text"] == "echo: first":
            tg.push_message("second")

    tg.listeners.append(reply_at_once)
    tg.push_message("first")
    await tg.wait_sent(2)
    await quiet()
    assert tg.texts() == ["echo: first", "echo: second"]


async def test_group_context_can_be_turned_off(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM, redis_url: str
) -> None:
    group = {"chat_id": GROUP, "chat_type": "supergroup"}
    telegram = {"group_context": False}
    async with telegram_gateway(tmp_path, llm, tg, redis_url, telegram=telegram):
        tg.push_message("secret plans", user_id=7, first_name="Bob", **group)
        tg.push_message("@gw_bot hi", **group)
        await tg.wait_sent(1)
    assert last_user_text(llm.requests[0]) == "Alice: hi"


async def test_wrong_token_fails_fast_without_leaking_it(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    wrong = "123456:WRONG-token-value-xyz"
    settings = gateway_settings(tmp_path, llm.url, telegram={"token": wrong, "api_url": tg.url})
    app = App(settings)
    app.add_configured_adapters()
    with pytest.raises(TelegramStartError) as caught:
        await app.start()
    await app.stop()
    assert "rejected the bot token" in str(caught.value)
    assert wrong not in str(caught.value) and caught.value.__cause__ is None


# -- commands -------------------------------------------------------------------------------


async def test_commands_bot_suffix_and_unknown(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    group = {"chat_id": GROUP, "chat_type": "supergroup"}
    tg.push_message("/help@other_bot", **group)  # for another bot in the group
    tg.push_message("/help@gw_bot", **group)
    [help_reply] = await tg.wait_sent(1)
    assert help_reply.text.startswith("I am an assistant") and "/new" in help_reply.text
    tg.push_message("/frobnicate now")  # DM
    tg.push_message("/frobnicate@gw_bot", **group)
    tg.push_message("/frobnicate", **group)  # bare, perhaps for another bot: not answered
    await tg.wait_sent(3)
    await quiet()
    unknown = "I don't know /frobnicate. Send /help to see what I can do."
    assert tg.texts() == [help_reply.text, unknown, unknown]
    assert llm.requests == []
    tg.push_message("/new")
    [*_, fresh] = await tg.wait_sent(4)
    assert "new conversation" in fresh.text


# -- sending --------------------------------------------------------------------------------


async def test_long_reply_is_split_with_code_fences_intact(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    code = [f"    if a < {i} and b > {i}: total &= {i}  # step {i}" for i in range(260)]
    prose = "\n\n".join(f"Paragraph {i}: x < y & z > w, said **someone**." for i in range(40))
    text = f"{prose}\n\n```python\n" + "\n".join(code) + "\n```\n\nThat is all."
    llm.push(Reply.text(text))
    tg.push_message("@gw_bot show me the code", chat_id=GROUP, chat_type="supergroup")
    await tg.wait_sent(4)
    await quiet()
    sent = tg.sent()
    total = len(sent)
    assert total >= 4
    shown_code: list[str] = []
    for number, part in enumerate(sent, 1):
        assert utf16_len(part.text) <= 4096
        visible = parse_html(part.text)  # every part is valid HTML on its own
        assert visible.rstrip().endswith(f"({number}/{total})")
        assert part.text.count("<pre>") == part.text.count("</pre>")
        for block in part.text.split('<code class="language-python">')[1:]:
            shown_code.extend(parse_html(block.split("</code>")[0]).split("\n"))
    assert [line for line in shown_code if line] == code
    # Only the first part quotes the question.
    assert "reply_parameters" in sent[0].params
    assert all("reply_parameters" not in s.params for s in sent[1:])


async def test_rejected_markup_is_resent_plain(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    tg.fail(
        "sendMessage",
        400,
        "Bad Request: can't parse entities: Unsupported start tag",
        when=lambda params: params.get("parse_mode") == "HTML",
    )
    llm.push(Reply.text("**Done**: see `x`"))
    tg.push_message("go")
    [reply] = await tg.wait_sent(1)
    assert reply.text == "**Done**: see `x`"
    assert "parse_mode" not in reply.params
    attempts = tg.calls_of("sendMessage")
    assert [a.status for a in attempts] == [400, 200]


async def test_429_retry_after_is_honoured(gw: App, tg: FakeBotAPI) -> None:
    tg.fail("sendMessage", 429, "Too Many Requests: retry after 1", retry_after=1)
    tg.push_message("hello")
    await tg.wait_sent(1, within=5)
    first, second = tg.calls_of("sendMessage")
    assert (first.status, second.status) == (429, 200)
    assert second.at - first.at >= 1.0


async def test_a_reply_telegram_answers_too_late_is_not_sent_twice(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    """Telegram delivered the message and its answer missed the read timeout (5 s): sending
    it again would show the person the same reply twice; it is counted as not delivered."""
    tg.stall("sendMessage", 6.5)
    llm.push(Reply.text("Only once."))
    tg.push_message("hello")
    [reply] = await tg.wait_sent(1, within=10)
    assert reply.text == "Only once."
    await eventually(
        lambda: gw.metrics.counter("deliveries_failed_total") == 1,
        within=15,
        what="the unanswered send counted as not delivered",
    )
    assert [c.text for c in tg.calls_of("sendMessage")] == ["Only once."]


async def test_a_429_on_getupdates_waits_what_telegram_asked(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    await eventually(lambda: adapter(gw).polling, what="the only replica polls")
    tg.fail("getUpdates", 429, "Too Many Requests: retry after 1", retry_after=1)
    await eventually(lambda: any(p.status == 429 for p in tg.polls), what="a 429 on getUpdates")
    llm.push(Reply.text("Here."))
    tg.push_message("hello")
    await tg.wait_sent(1, within=10)  # fetched by a poll after the 429
    polls = tg.polls
    limited = next(n for n, call in enumerate(polls) if call.status == 429)
    assert polls[limited + 1].at - polls[limited].at >= 1.0


async def test_403_is_permanent_and_logged_once(
    gw: App, tg: FakeBotAPI, caplog: pytest.LogCaptureFixture
) -> None:
    tg.fail("sendMessage", 403, "Forbidden: bot was blocked by the user", times=2)
    chat = ChatRef(platform="telegram", chat_id="42")
    with caplog.at_level(logging.WARNING, logger="adapters.telegram"):
        for _ in range(2):
            with pytest.raises(DeliveryError) as caught:
                await adapter(gw).send(Outbound(chat=chat, text="anyone there?"))
            assert caught.value.permanent
    assert len(tg.calls_of("sendMessage")) == 2  # one attempt each, no retries
    assert len([r for r in caplog.records if "forbids" in r.getMessage()]) == 1


async def test_group_upgraded_to_supergroup_is_followed(gw: App, tg: FakeBotAPI) -> None:
    old_group = ChatRef(platform="telegram", chat_id="-4242", kind=ChatKind.GROUP)
    tg.fail(
        "sendMessage",
        400,
        "Bad Request: group chat was upgraded to a supergroup chat",
        migrate_to=GROUP,
    )
    ref = await adapter(gw).send(Outbound(chat=old_group, text="still here"))
    assert ref.chat.chat_id == str(GROUP)
    assert [c.params["chat_id"] for c in tg.calls_of("sendMessage")] == [-4242, GROUP]


async def test_typing_in_a_topic_while_the_turn_runs(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM, redis_url: str
) -> None:
    llm.push(Reply.text("slow answer", delay=0.6))
    async with telegram_gateway(tmp_path, llm, tg, redis_url, router={"typing_delay": 0.1}):
        tg.push_message("@gw_bot think", chat_id=GROUP, chat_type="supergroup", thread_id=5)
        await tg.wait_sent(1)
    [typing] = tg.calls_of("sendChatAction")
    assert typing.params == {"chat_id": GROUP, "action": "typing", "message_thread_id": 5}
    assert typing.at < tg.sent()[0].at


async def test_edit_text_and_buttons(gw: App, tg: FakeBotAPI) -> None:
    chat = ChatRef(platform="telegram", chat_id="42")
    ref = await adapter(gw).send(Outbound(chat=chat, text="step 1"))
    row = (Button(label="Next", data="demo:next"),)
    await adapter(gw).edit(ref, Outbound(chat=chat, text="step *2*", buttons=(row,)))
    await adapter(gw).edit(ref, Outbound(chat=chat, text="step *2*", buttons=(row,)))  # same
    edits = tg.calls_of("editMessageText")
    assert [e.status for e in edits] == [200, 400]  # "not modified" is not an error
    assert edits[0].params["text"] == "step <i>2</i>"
    keyboard = edits[0].params["reply_markup"]["inline_keyboard"]
    assert keyboard == [[{"text": "Next", "callback_data": "demo:next"}]]


# -- buttons and approvals ------------------------------------------------------------------


@dataclass(frozen=True)
class Pick(CallbackData, prefix="demo"):
    """The test's own buttons: `demo:<value>`."""

    value: str


async def test_button_press_round_trip(gw: App, tg: FakeBotAPI) -> None:
    presses: list[ButtonPress] = []

    async def on_press(press: ButtonPress, data: Pick) -> PressReply:
        presses.append(press)
        return PressReply(toast="Noted.", edit_text="You chose **yes**.")

    gw.extensions.add_buttons(Pick, on_press)
    chat = group_chat(thread=9)
    rows = ((Button(label="Yes", data="demo:yes"), Button(label="No", data="demo:no")),)
    ref = await adapter(gw).send(Outbound(chat=chat, text="Pick one", buttons=rows))
    [prompt] = tg.sent()
    assert prompt.params["message_thread_id"] == 9
    buttons = prompt.params["reply_markup"]["inline_keyboard"][0]
    assert [b["callback_data"] for b in buttons] == ["demo:yes", "demo:no"]
    message = tg.messages[(GROUP, int(ref.message_id))]
    tg.push_press("demo:yes", on=message, user_id=7, first_name="Bob")
    [answer] = await tg.wait_calls("answerCallbackQuery", 1)
    assert answer.params["text"] == "Noted." and answer.params.get("show_alert") != "true"
    [edit] = await tg.wait_calls("editMessageText", 1)
    assert edit.params["text"] == "You chose <b>yes</b>."
    assert "reply_markup" not in edit.params  # the buttons are gone
    assert tg.messages[(GROUP, int(ref.message_id))].get("reply_markup") is None
    [press] = presses
    assert press.data == "demo:yes" and press.user.user_id == "7"
    assert press.chat == chat and press.message == SentRef(chat=chat, message_id=ref.message_id)
    # A press nobody handles (an old message, a restarted feature) gets a clear toast.
    tg.push_press("gone:1", on=message)
    answers = await tg.wait_calls("answerCallbackQuery", 2)
    assert answers[1].params["text"] == EXPIRED_BUTTON
    assert answers[1].params["show_alert"] == "true"
    assert len(tg.calls_of("editMessageText")) == 1


class _Cmd(BaseModel):
    command: str


async def test_approval_with_telegram_buttons(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    ran: list[str] = []

    async def handler(args: _Cmd, ctx: ToolContext) -> str:
        ran.append(args.command)
        return "ok"

    async def approval(args: _Cmd, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(summary=args.command, reason="it deletes files", shape=args.command)

    gw.tools.register(ToolSpec("danger", "runs things", _Cmd, handler, "test", approval))
    llm.push(Reply.call("danger", command="rm -rf build"), Reply.text("Deleted build/."))
    tg.push_message("clean the build")
    [prompt] = await tg.wait_sent(1)
    keyboard = prompt.params["reply_markup"]["inline_keyboard"]
    approve = next(b for row in keyboard for b in row if b["text"] == "Approve once")
    tg.push_press(approve["callback_data"], on=prompt.result)
    sent = await tg.wait_sent(2)
    assert sent[-1].text == "Deleted build/." and ran == ["rm -rf build"]
    # The turn goes on once the decision is stored, so its answer may come before the toast.
    [answer] = await tg.wait_calls("answerCallbackQuery", 1)
    assert answer.params["text"] == "Approved."
    [edit] = await tg.wait_calls("editMessageText", 1)
    assert "Approved by Alice" in edit.params["text"]


# -- access and attachments -----------------------------------------------------------------


async def test_allowed_users_and_chats(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM, redis_url: str
) -> None:
    access = {"allowed_users": ["@alice"], "allowed_chats": [str(GROUP)]}
    async with telegram_gateway(tmp_path, llm, tg, redis_url, telegram=access):
        tg.push_message("hello?", chat_id=99, user_id=99, username="mallory")
        tg.push_message("hello??", chat_id=99, user_id=99, username="mallory")
        tg.push_message("hi", chat_id=42, user_id=42, username="alice")
        # Bob is not listed, but the team group is.
        tg.push_message("@gw_bot hi", chat_id=GROUP, chat_type="supergroup", user_id=7,
                        first_name="Bob")  # fmt: skip
        # Chatter in an unlisted group is neither answered nor refused.
        tg.push_message("blah", chat_id=-100555, chat_type="supergroup", user_id=8)
        await tg.wait_sent(3)
        await quiet()
    assert tg.texts(99) == [NOT_ALLOWED]
    assert tg.texts(42) == ["echo: hi"]
    assert tg.texts(GROUP) == ["echo: Bob: hi"]
    assert tg.texts(-100555) == []


async def test_photo_and_document_attachments(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    photo = jpeg(2400, 1800)
    tg.add_file("big-photo", photo, path="photos/file_1.jpg")
    sizes = [
        {"file_id": "small-photo", "file_unique_id": "s1", "width": 90, "height": 60,
         "file_size": 900},
        {"file_id": "big-photo", "file_unique_id": "b1", "width": 2400, "height": 1800,
         "file_size": len(photo)},
    ]  # fmt: skip
    llm.push(Reply.text("A red square."))
    tg.push_message(caption="what is this?", photo=sizes)
    await tg.wait_for(lambda: "A red square." in tg.texts())
    content = last_user_text(llm.requests[0])
    assert content.startswith("what is this?")
    note = f"[attachment: image photo_b1.jpg (image/jpeg, {len(photo)} bytes) file_id=big-photo]"
    assert note in content
    # The largest size went to the model as an image part, scaled to media.max_image_px.
    [image] = image_parts(llm.requests[0])
    assert image.size == (1568, 1176) and image.format == "JPEG"
    data = await adapter(gw).download("big-photo", max_bytes=len(photo))
    assert data == photo
    with pytest.raises(AttachmentTooLarge):
        await adapter(gw).download("big-photo", max_bytes=1000)
    document = {"file_id": "doc-1", "file_unique_id": "d1", "file_name": "notes.pdf",
                "mime_type": "application/pdf", "file_size": 1234}  # fmt: skip
    llm.push(Reply.text("Got the PDF."))
    tg.push_message(document=document)
    await tg.wait_for(lambda: "Got the PDF." in tg.texts())
    assert "[attachment: document notes.pdf (application/pdf, 1234 bytes) file_id=doc-1]" in (
        last_user_text(llm.requests[1])
    )
    # History keeps the note, never the image bytes.
    assert image_parts(llm.requests[1]) == []
    assert "base64" not in json.dumps(llm.requests[1]["messages"][:-1])


# -- webhook and duplicates -----------------------------------------------------------------


async def test_webhook_checks_the_secret_and_drops_retries(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM, redis_url: str
) -> None:
    telegram = {
        "mode": "webhook",
        "webhook_url": "https://bot.example.org/telegram/webhook",
        "webhook_secret": SECRET,
    }
    http = {"enabled": True, "port": 0}
    async with telegram_gateway(tmp_path, llm, tg, redis_url, telegram=telegram, http=http) as app:
        assert tg.webhook is not None
        assert tg.webhook["url"] == "https://bot.example.org/telegram/webhook"
        assert tg.webhook["secret_token"] == SECRET
        assert await adapter(app).state() == "receiving by webhook"
        assert app.http is not None
        update = {"update_id": 5001, "message": tg.message("via webhook")}
        url = f"http://127.0.0.1:{app.http.port}/telegram/webhook"
        async with httpx.AsyncClient() as http_client:

            async def post(headers: dict[str, str]) -> int:
                response = await http_client.post(url, content=json.dumps(update), headers={
                    "Content-Type": "application/json", **headers})  # fmt: skip
                return response.status_code

            assert await post({}) == 403
            assert await post({"X-Telegram-Bot-Api-Secret-Token": "wrong"}) == 403
            await quiet()
            assert llm.requests == [] and tg.sent() == []
            # Telegram sends a call again when it saw no answer in time, even while the first
            # is still being read: every call is answered 200, the update processed once.
            secret = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            assert await asyncio.gather(*(post(secret) for _ in range(3))) == [200] * 3
            [reply] = await tg.wait_sent(1)
            assert await post(secret) == 200  # after it was answered
            await quiet()
            # Read and taken: nothing is left waiting in the received updates.
            assert await app.store.hgetall(keys.TELEGRAM_RECEIVED) == {}
    assert reply.text == "echo: via webhook"
    assert len(tg.sent()) == 1 and len(llm.requests) == 1
    assert tg.polls == []  # webhook mode never polls


async def test_redelivered_update_after_restart_is_processed_once(
    tmp_path: Path, tg: FakeBotAPI, llm: ScriptedLLM, redis_url: str
) -> None:
    prefix = f"tgdup{time.monotonic_ns()}"
    redis = {"url": redis_url, "key_prefix": prefix}
    async with telegram_gateway(tmp_path, llm, tg, redis=redis):
        update_id = tg.push_message("only once, please")
        await tg.wait_sent(1)
    redelivered = {"update_id": update_id, "message": tg.messages[(42, 1)]}
    async with telegram_gateway(tmp_path, llm, tg, redis=redis):
        tg.push_update(redelivered)  # as Telegram does when a poller died before confirming
        tg.push_message("a new one")
        await tg.wait_sent(2)
        await quiet()
    assert tg.texts() == ["echo: only once, please", "echo: a new one"]
