"""The conversation around the bot reaches its answer: a Slack thread it is first mentioned in
(read with conversations.replies) and a Discord channel's unaddressed messages, both marked as
outside content. Real slack-bolt and discord.py against the fake platforms."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_discord import discord_app
from tests.e2e.test_slack_events import settings_for
from tests.e2e.test_telegram import telegram_gateway
from tests.fakes.discord import BOB, BOT_ID, GENERAL_ID, FakeDiscord
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fakes.slack import FakeSlack, deliver, event_callback, events_url, mention, slack_gateway
from tests.fakes.telegram import FakeBotAPI

pytestmark = pytest.mark.e2e

DATA = '<untrusted-data source="chat messages">'


async def test_a_slack_mention_mid_thread_brings_the_threads_earlier_messages(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> None:
    thread = "5000.000100"
    slack.add_thread_message("C1", thread, "U2", "the deploy failed with exit code 137")
    slack.add_thread_message("C1", thread, "U3", "probably the memory limit again")
    settings = settings_for(tmp_path, llm, slack, redis_url, context={"max_messages": 10})
    async with slack_gateway(settings) as app:
        asked = mention("what do you think of the above?", ts="5000.000900", thread_ts=thread)
        assert (await deliver(events_url(app), json.dumps(event_callback(asked)))).status == 200
        [posted] = await slack.wait_for("chat.postMessage")
        assert posted["thread_ts"] == thread
        [read] = slack.calls_to("conversations.replies")
        assert (read["channel"], read["ts"]) == ("C1", thread)
        content = last_user_text(llm.requests[0])
        assert (
            f"{DATA}\nU2: the deploy failed with exit code 137\n"
            "U3: probably the memory limit again\n</untrusted-data>"
        ) in content
        assert content.endswith("U1: what do you think of the above?")

        # The thread is answered now: a later mention there does not read it again.
        again = mention("and now?", ts="5000.001000", thread_ts=thread)
        assert (await deliver(events_url(app), json.dumps(event_callback(again)))).status == 200
        await slack.wait_for("chat.postMessage", 2)
        assert len(slack.calls_to("conversations.replies")) == 1
        assert DATA not in last_user_text(llm.requests[1])


async def test_a_slack_thread_read_is_bounded_by_the_context_settings(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, redis_url: str
) -> None:
    thread = "6000.000100"
    slack.add_thread_message("C1", thread, "U2", "the start of the thread")
    for n in range(8):
        slack.add_thread_message("C1", thread, "U3", f"reply {n}")
    settings = settings_for(tmp_path, llm, slack, redis_url, context={"max_messages": 3})
    async with slack_gateway(settings) as app:
        asked = mention("summarise", ts="6000.000900", thread_ts=thread)
        assert (await deliver(events_url(app), json.dumps(event_callback(asked)))).status == 200
        await slack.wait_for("chat.postMessage")
    content = last_user_text(llm.requests[0])
    assert "U2: the start of the thread\nU3: reply 6\nU3: reply 7\n</untrusted-data>" in content
    assert "reply 5" not in content


async def test_discord_channel_messages_not_for_the_bot_reach_its_next_answer(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    async with FakeDiscord() as fake, discord_app(tmp_path, llm, fake, redis_url):
        await fake.send_message("the build is red since this morning", author=BOB)
        await fake.send_message("it is the flaky login test", author=BOB)
        llm.push(Reply.text("Sounds like the login test."))
        await fake.send_message(f"<@{BOT_ID}> what do you think of the above?")
        await fake.wait_for("POST", rf"/channels/{GENERAL_ID}/messages")
        assert len(llm.requests) == 1  # the chatter itself was not answered
    content = last_user_text(llm.requests[0])
    assert (
        f"{DATA}\nbob: the build is red since this morning\nbob: it is the flaky login test\n"
        "</untrusted-data>"
    ) in content
    assert content.endswith("alice: what do you think of the above?")


async def test_read_channel_reads_the_discord_channel_as_outside_content(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    async with (
        FakeDiscord() as fake,
        discord_app(tmp_path, llm, fake, redis_url, channel_context=False),
    ):
        await fake.send_message("the release is on friday", author=BOB)
        llm.push(Reply.call("read_channel", messages=10), Reply.text("Friday, says Bob."))
        await fake.send_message(f"<@{BOT_ID}> when is the release?")
        await fake.wait_for("POST", rf"/channels/{GENERAL_ID}/messages")
        assert DATA not in last_user_text(llm.requests[0])  # not kept as context: read on ask
        [result] = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
    assert result.startswith('<untrusted-data source="read_channel">')
    assert "bob: the release is on friday" in result
    [read] = fake.calls_to("GET", rf"/channels/{GENERAL_ID}/messages")
    assert read.query["limit"] == "10"


def _offered(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or ()]


async def test_read_channel_is_offered_only_where_history_can_be_read(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, redis_url: str
) -> None:
    """Telegram's Bot API reads no history: the tool is not offered there (nor listed for
    load_tools), and a call to it is refused like any tool not allowed in the chat. (On Discord
    it runs: test_read_channel_reads_the_discord_channel_as_outside_content.)"""
    all_tools = {"on_demand": False}
    async with telegram_gateway(tmp_path, llm, tg, redis_url, tools=all_tools):
        llm.push(Reply.call("read_channel", messages=5), Reply.text("I cannot read it here."))
        tg.push_message("what was said before?")
        await tg.wait_for(lambda: "I cannot read it here." in tg.texts(), within=10)
    assert "read_channel" not in _offered(llm.requests[0])
    assert "todo" in _offered(llm.requests[0])  # the rest of its group is
    [refused] = tool_results(llm.requests[1])
    assert refused.startswith("error: the tool 'read_channel' is not allowed in this chat")
