"""The Discord adapter end to end: the real discord.py inside the real gateway, against a fake
Discord (REST + gateway websocket), a scripted LLM and a real redis-server.

Covers mentions, DMs, threads as sessions, slash commands (defer + followups), /new on the
right session, splitting, typing, 429s, missing permissions, access rules and auto-threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.discord import DiscordAdapter
from gateway.app.app import App
from gateway.scheduling.jobs import JobKind
from gateway.sdk.channels import DeliveryError
from gateway.sdk.messages import ChatKind, ChatRef, Outbound, UserRef
from tests.fakes.discord import (
    ALICE,
    APP_ID,
    BOB,
    BOT_ID,
    DM_ID,
    FREE_ID,
    GENERAL_ID,
    GUILD_ID,
    MEMBER_ROLE_ID,
    OTHER_BOT,
    THREAD_ID,
    FakeDiscord,
    discord_section,
)
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.harness import eventually, gateway_settings

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

MENTION = f"<@{BOT_ID}>"
GENERAL = rf"/channels/{GENERAL_ID}/messages"
THREAD = rf"/channels/{THREAD_ID}/messages"
FOLLOWUP = rf"/webhooks/{APP_ID}/tok-\d+"
CALLBACK = r"/interactions/\d+/tok-\d+/callback"


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@contextlib.asynccontextmanager
async def discord_app(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeDiscord,
    redis_url: str = "",
    access: dict[str, Any] | None = None,
    scheduler: dict[str, Any] | None = None,
    streaming: dict[str, Any] | None = None,
    **discord: Any,
) -> AsyncIterator[App]:
    """The real App with the Discord adapter configured, started and connected to the fake."""
    settings = gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        discord=discord_section(fake, **discord),
        access=access or {},
        scheduler=scheduler or {},
        streaming=streaming or {},
    )
    app = App(settings)
    assert app.add_configured_adapters() == ["discord"]
    await app.start()
    try:
        adapter = app.outbox.adapter("discord")
        assert isinstance(adapter, DiscordAdapter)
        await asyncio.wait_for(adapter.ready.wait(), 5)
        yield app
    finally:
        await app.stop()


def user_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


async def test_mention_round_trip_with_typing_and_ignored_chatter(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeDiscord,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    async with discord_app(tmp_path, llm, fake, redis_url):
        await fake.send_message("just chatting, not for the bot", author=BOB)
        await fake.send_message(f"{MENTION} bots are ignored", author=OTHER_BOT)
        llm.push(Reply.text("Hello, @everyone-safe Alice!", delay=0.3))
        asked = await fake.send_message(f"{MENTION} hi there, ask <@{BOB}> too")
        (reply,) = await fake.wait_for("POST", GENERAL)
    assert len(llm.requests) == 1
    # Bob's chatter was not answered; it came with the next answer as context, marked as data.
    content = last_user_text(llm.requests[0])
    assert content.endswith("\n\nalice: hi there, ask @bob too")
    assert '<untrusted-data source="chat messages">\nbob: just chatting' in content
    assert reply.body["content"] == "Hello, @everyone-safe Alice!"
    assert str(reply.body["message_reference"]["message_id"]) == asked["id"]
    assert reply.body["allowed_mentions"]["parse"] == []  # no @everyone, roles or users
    assert fake.calls_to("POST", rf"/channels/{GENERAL_ID}/typing")  # typing while it ran
    assert reply.authorized  # REST calls carry the bot token...
    assert "fake-token" not in caplog.text  # ...which no log line shows, even at DEBUG


async def test_a_message_whose_content_is_null_is_skipped_without_a_traceback(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeDiscord,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 30: MESSAGE_CREATE with `content: null` raised inside the message handler."""
    caplog.set_level(logging.WARNING)
    async with discord_app(tmp_path, llm, fake, redis_url):
        await fake.send_message(None, dm=True)
        await fake.send_message(None)
        llm.push(Reply.text("still here"))
        await fake.send_message("are you there?", dm=True)
        dm = rf"/channels/{DM_ID}/messages"
        await fake.wait_for_post(dm, "Your message was empty. Send some text.")
        await fake.wait_for_post(dm, "still here")
    assert [last_user_text(r) for r in llm.requests] == ["are you there?"]
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert failures == [], [r.getMessage() for r in failures]


async def test_direct_message_and_dms_refused_when_disabled(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url):
        llm.push(Reply.text("Hi in private."))
        await fake.send_message("hello, no mention needed", dm=True)
        (reply,) = await fake.wait_for("POST", rf"/channels/{DM_ID}/messages")
        assert reply.body["content"] == "Hi in private."
        assert last_user_text(llm.requests[0]) == "hello, no mention needed"
    async with discord_app(tmp_path, llm, fake, redis_url, allow_dms=False):
        await fake.send_message("hello again", dm=True)
        replies = await fake.wait_for("POST", rf"/channels/{DM_ID}/messages", count=2)
    assert "do not take direct messages" in replies[1].body["content"]
    assert len(llm.requests) == 1


async def test_thread_is_its_own_session(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url):
        llm.push(Reply.text("noted A"), Reply.text("in the thread"), Reply.text("channel again"))
        await fake.send_message(f"{MENTION} remember A")
        await fake.wait_for_post(GENERAL, "noted A")
        await fake.send_message(f"{MENTION} what did I say?", channel=THREAD_ID)
        await fake.wait_for_post(THREAD, "in the thread")
        await fake.send_message(f"{MENTION} and here?")
        await fake.wait_for_post(GENERAL, "channel again")
    assert user_texts(llm.requests[1]) == ["alice: what did I say?"]  # nothing from the channel
    assert user_texts(llm.requests[2]) == ["alice: remember A", "alice: and here?"]


async def test_slash_ask_defers_then_answers_with_followups(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url):
        (sync,) = fake.calls_to("PUT", rf"/applications/{APP_ID}/commands")
        names = {command["name"] for command in sync.body}
        assert names == {"ask", "new", "stop", "status", "remind"}
        llm.push(Reply.text("x" * 2500, delay=0.2))
        started = time.monotonic()
        await fake.slash("ask", {"prompt": "the meaning of life?"})
        (deferred,) = await fake.wait_for("POST", CALLBACK)
        followups = await fake.wait_for("POST", FOLLOWUP, count=2)
    assert deferred.body == {"type": 5} and deferred.at - started < 3  # "thinking…" in time
    assert deferred.query == {"with_response": "1"}
    assert not deferred.authorized  # interaction callbacks use the token in the URL
    assert last_user_text(llm.requests[0]) == "alice: the meaning of life?"
    assert [len(f.body["content"]) <= 2000 for f in followups] == [True, True]
    assert followups[0].body["content"].endswith("(1/2)")
    assert not fake.calls_to("POST", GENERAL)  # the answer went to the interaction only


async def test_slash_answer_falls_back_to_the_channel_when_the_token_is_gone(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url):
        fake.fail("POST", FOLLOWUP, 404, {"message": "Unknown Webhook", "code": 10015})
        llm.push(Reply.text("late answer"))
        await fake.slash("ask", {"prompt": "slow one"})
        posted = await fake.wait_for_post(GENERAL, "late answer")
    assert "message_reference" not in posted.body  # the marker is not a message id


async def test_slash_new_resets_only_the_session_it_was_used_in(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    # In a guild /new is for admins and moderator roles; alice has the role.
    moderators = {"moderator_roles": [str(MEMBER_ROLE_ID)]}
    async with discord_app(
        tmp_path, llm, fake, redis_url, access=moderators, sync_guilds=[str(GUILD_ID)]
    ):
        assert fake.calls_to("PUT", rf"/applications/{APP_ID}/guilds/{GUILD_ID}/commands")
        await fake.send_message(f"{MENTION} channel fact")
        await fake.wait_for_post(GENERAL, "echo: alice: channel fact")
        await fake.send_message(f"{MENTION} thread fact", channel=THREAD_ID)
        await fake.wait_for_post(THREAD, "echo: alice: thread fact")
        await fake.slash("new", channel=THREAD_ID)
        (new,) = await fake.wait_for("POST", FOLLOWUP)
        await fake.slash("status", channel=THREAD_ID)
        status = (await fake.wait_for("POST", FOLLOWUP, count=2))[1]
        await fake.send_message(f"{MENTION} thread again", channel=THREAD_ID)
        await fake.wait_for_post(THREAD, "echo: alice: thread again")
        await fake.send_message(f"{MENTION} channel again")
        await fake.wait_for_post(GENERAL, "echo: alice: channel again")
    assert new.body["content"].startswith("Started a new conversation")
    assert f"discord:{GENERAL_ID}:t{THREAD_ID}" in status.body["content"]
    assert "Messages in history: 0" in status.body["content"]
    assert user_texts(llm.requests[2]) == ["alice: thread again"]
    assert user_texts(llm.requests[3]) == ["alice: channel fact", "alice: channel again"]


async def test_slash_remind_in_a_dm_goes_to_the_router_command(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url):
        await fake.slash("remind", {"when_and_text": "whenever it suits do X"}, dm=True)
        (followup,) = await fake.wait_for("POST", FOLLOWUP)
    # The router's /remind parsed "/remind <when_and_text>" and answered; no LLM turn.
    assert "Usage: /remind" in followup.body["content"]
    assert not llm.requests


async def test_long_reply_is_split_under_2000_with_fences_intact(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    code = "\n".join(f"line_{i} = {i}" for i in range(300))
    answer = "Here you go:\n\n```python\n" + code + "\n```\n\nDone."
    async with discord_app(tmp_path, llm, fake, redis_url):
        llm.push(Reply.text(answer))
        await fake.send_message(f"{MENTION} write code")
        await fake.wait_for("POST", GENERAL)
        await asyncio.sleep(0.3)
    parts = [c.body["content"] for c in fake.calls_to("POST", GENERAL)]
    assert len(parts) >= 3 and all(len(p) <= 2000 for p in parts)
    assert all(p.count("```") % 2 == 0 for p in parts)  # each part renders on its own
    assert "message_reference" in fake.calls_to("POST", GENERAL)[0].body
    assert all("message_reference" not in c.body for c in fake.calls_to("POST", GENERAL)[1:])


async def test_rate_limit_429_is_waited_out(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url):
        fake.rate_limit("POST", GENERAL, retry_after=0.6)
        llm.push(Reply.text("eventually"))
        await fake.send_message(f"{MENTION} hi")
        first, second = await fake.wait_for("POST", GENERAL, count=2)
    assert second.body["content"] == "eventually"
    assert second.at - first.at >= 0.55  # discord.py slept for retry_after before retrying


async def test_missing_permission_is_logged_and_permanent(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeDiscord,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url) as app:
        fake.forbid("POST", THREAD)
        chat = ChatRef(
            platform="discord",
            chat_id=str(GENERAL_ID),
            thread_id=str(THREAD_ID),
            kind=ChatKind.GROUP,
            space_id=str(GUILD_ID),
        )
        with caplog.at_level(logging.ERROR), pytest.raises(DeliveryError) as error:
            await app.outbox.send(Outbound(chat=chat, text="hello"))
    assert error.value.permanent
    line = next(r.getMessage() for r in caplog.records if "missing permission" in r.getMessage())
    assert f"discord:{GENERAL_ID}/{THREAD_ID}" in line and "Send Messages in Threads" in line
    assert "fake-token" not in caplog.text


async def test_allowed_roles_and_channels(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    rules: dict[str, Any] = {
        "allowed_roles": [str(MEMBER_ROLE_ID)],
        "allowed_channels": [str(GENERAL_ID)],
    }
    async with discord_app(tmp_path, llm, fake, redis_url, **rules):
        await fake.send_message(f"{MENTION} may I?", author=BOB)
        (refusal,) = await fake.wait_for("POST", GENERAL)
        await fake.send_message(f"{MENTION} and here?", channel=FREE_ID)
        (elsewhere,) = await fake.wait_for("POST", rf"/channels/{FREE_ID}/messages")
        llm.push(Reply.text("yes, Alice"))
        await fake.send_message(f"{MENTION} may I?")  # alice has the role
        await fake.send_message(f"{MENTION} thread counts as its channel", channel=THREAD_ID)
        await fake.wait_for("POST", GENERAL, count=2)
        await fake.wait_for("POST", THREAD)
    assert "not allowed" in refusal.body["content"]
    assert "not enabled in this channel" in elsewhere.body["content"]
    assert len(llm.requests) == 2


async def test_free_response_channel_and_auto_thread(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    settings: dict[str, Any] = {"free_response_channels": [str(FREE_ID)], "auto_thread": True}
    async with discord_app(tmp_path, llm, fake, redis_url, **settings):
        llm.push(Reply.text("free answer"))
        await fake.send_message("no mention needed here", channel=FREE_ID)
        (free,) = await fake.wait_for("POST", rf"/channels/{FREE_ID}/messages")
        assert free.body["content"] == "free answer"

        llm.push(Reply.text("answer in a thread"), Reply.text("still here"))
        await fake.send_message(f"{MENTION} plan the release\nwith details")
        (opened,) = await fake.wait_for("POST", rf"/channels/{GENERAL_ID}/messages/\d+/threads")
        thread_id = next(t for t in fake.threads if t != str(THREAD_ID))
        (answer,) = await fake.wait_for("POST", rf"/channels/{thread_id}/messages")
        # In a thread the bot opened, people go on without mentioning it.
        await fake.send_message("and the date?", channel=int(thread_id))
        await fake.wait_for_post(rf"/channels/{thread_id}/messages", "still here")
    assert opened.body["name"] == "plan the release"
    assert answer.body["content"] == "answer in a thread"
    assert "message_reference" not in answer.body
    assert user_texts(llm.requests[2]) == [
        "alice: plan the release\nwith details",
        "alice: and the date?",
    ]
    assert not fake.calls_to("POST", GENERAL)


async def test_missing_message_content_intent_is_explained(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeDiscord,
    redis_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake.identify_close_code = 4014  # what Discord does when the portal switch is off
    settings = gateway_settings(
        tmp_path, llm.url, redis_url=redis_url, discord=discord_section(fake)
    )
    app = App(settings)
    app.add_configured_adapters()
    with caplog.at_level(logging.ERROR):
        await app.start()
        try:
            await fake.wait_for("PUT", rf"/applications/{APP_ID}/commands")
            for _ in range(100):
                if "MESSAGE CONTENT INTENT" in caplog.text:
                    break
                await asyncio.sleep(0.02)
        finally:
            await app.stop()
    assert "enable MESSAGE CONTENT INTENT" in caplog.text
    assert fake.identifies and fake.identifies[0]["intents"] & (1 << 15)  # message_content


async def test_a_failed_job_is_reported_to_an_admin_in_a_direct_message(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    # A Discord user id is not a channel: the report must open the admin's DM channel first.
    access = {"admins": [f"discord:{ALICE}", "discord:12345"]}
    fake.forbid("POST", GENERAL, times=100)  # the job's channel refuses the bot
    fast = {"min_interval_seconds": 1.0, "retry_base_delay": 0.01, "retry_max_delay": 0.05}
    async with discord_app(tmp_path, llm, fake, redis_url, access=access, scheduler=fast) as app:
        await eventually(lambda: app.scheduler.is_leader)
        general = ChatRef(
            platform="discord", chat_id=str(GENERAL_ID), kind=ChatKind.GROUP, space_id=str(GUILD_ID)
        )
        alice = UserRef(platform="discord", user_id=str(ALICE))
        job = await app.scheduler.create(
            kind=JobKind.MESSAGE, text="standup", when="every 1s", chat=general, user=alice
        )
        [report] = await fake.wait_for("POST", rf"/channels/{DM_ID}/messages", within=10)
    opened = [c.body for c in fake.calls_to("POST", r"/users/@me/channels")]
    # The other admin is no user Discord knows, so no DM; Alice's was opened, and only once.
    assert sorted(int(b["recipient_id"]) for b in opened) == [12345, ALICE]
    assert report.body["content"].startswith(f"Scheduled job {job.id} for discord:{GENERAL_ID}")
    assert not fake.calls_to("POST", r"/channels/12345/messages")  # never a user id as channel
