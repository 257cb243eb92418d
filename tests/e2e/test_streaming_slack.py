"""Streamed replies on Slack end to end: slack-bolt and slack_sdk against the fake Slack, a
scripted model that streams in timed chunks. The chat streaming methods in threads (text
appended, tool calls as task cards), and post-then-`chat.update` where they are refused, in
top-level DMs, and once the shown text stops being the answer's start."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.mrkdwn import to_mrkdwn
from gateway.app.app import App
from tests.e2e.test_slack_events import settings_for
from tests.fakes.llm import Reply, ScriptedLLM
from tests.fakes.slack import (
    TEAM,
    FakeSlack,
    deliver,
    event_callback,
    events_url,
    mention,
    message,
    slack_gateway,
)

pytestmark = pytest.mark.e2e

FAST = {"interval_ms": 150, "first_delay_ms": 0}
ANSWER = "Here is **the plan**:\n\n" + "\n".join(f"- step {n} of the work" for n in range(12))


def streamed(text: str = ANSWER, chunks: int = 12, delay: float = 0.06) -> Reply:
    return Reply.streamed(text, chunks=chunks, delay=delay)


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack) -> AsyncIterator[App]:
    async with slack_gateway(settings_for(tmp_path, llm, slack, "", streaming=FAST)) as app:
        yield app


async def post(app: App, event: dict[str, Any]) -> None:
    delivery = await deliver(events_url(app), json.dumps(event_callback(event)))
    assert delivery.status == 200


async def test_thread_reply_streams_with_the_stream_methods(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    llm.push(streamed())
    await post(gw, mention("plan it", ts="1000.000100"))
    [stop] = await slack.wait_for("chat.stopStream")
    [start] = slack.calls_to("chat.startStream")
    assert start["channel"] == "C1" and start["thread_ts"] == "1000.000100"
    assert (start["recipient_user_id"], start["recipient_team_id"]) == ("U1", TEAM)
    assert len(slack.calls_to("chat.appendStream")) >= 2
    [shown] = slack.bot_messages("C1")
    assert shown.text == ANSWER and not shown.streaming and shown.ts == stop["ts"]
    assert slack.calls_to("chat.postMessage") == [] and slack.calls_to("chat.update") == []
    # The working reaction came off once the reply started.
    await slack.wait_for("reactions.remove")


async def test_refused_stream_methods_fall_back_to_post_and_update(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    slack.stream_methods = False
    llm.push(streamed(), streamed("Again: " + ANSWER))
    await post(gw, mention("plan it", ts="1000.000100"))
    await slack.wait_for("chat.update", 2)
    await wait_shown(slack, to_mrkdwn(ANSWER))
    [posted] = slack.calls_to("chat.postMessage")
    assert posted["thread_ts"] == "1000.000100"
    assert len(slack.calls_to("chat.startStream")) == 1
    await post(gw, mention("again", ts="1001.000100"))
    await wait_shown(slack, to_mrkdwn("Again: " + ANSWER))
    assert len(slack.calls_to("chat.startStream")) == 1  # not tried again


async def wait_shown(slack: FakeSlack, text: str) -> None:
    await slack._until(lambda: any(m.text == text for m in slack.bot_messages()), 8)


async def test_top_level_dm_posts_then_updates(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    llm.push(streamed())
    await post(gw, message("plan it", channel="D1", ts="2000.000100"))
    await wait_shown(slack, to_mrkdwn(ANSWER))
    [posted] = slack.calls_to("chat.postMessage")
    assert posted["channel"] == "D1" and "thread_ts" not in posted
    assert slack.calls_to("chat.startStream") == []
    assert len(slack.bot_messages("D1")) == 1


async def test_tool_calls_show_as_task_cards_then_the_answer(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    llm.push(Reply.call("shell", command="sleep 0.5; echo hi"), streamed())
    await post(gw, mention("run it", ts="1000.000100"))
    await slack.wait_for("chat.stopStream")
    [shown] = slack.bot_messages("C1")
    assert shown.text == ANSWER
    [task] = shown.tasks.values()
    assert task["title"] == "Running shell: `sleep 0.5; echo hi`"
    assert task["status"] == "complete"
    [start] = slack.calls_to("chat.startStream")
    assert start["chunks"][0]["status"] == "in_progress"


async def test_text_before_a_tool_call_is_replaced_by_updating(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    first = Reply(
        content="Let me think about this for a moment.",
        chunks=6,
        chunk_delay=0.06,
        tool_calls=[("shell", {"command": "echo hi"})],
    )
    llm.push(first, streamed())
    await post(gw, mention("run it", ts="1000.000100"))
    await wait_shown(slack, to_mrkdwn(ANSWER))
    [shown] = slack.bot_messages("C1")
    assert "Let me think" not in shown.text
    assert slack.calls_to("chat.startStream")  # it began as a stream
    assert slack.calls_to("chat.update")  # and went on by updating


async def test_429_in_the_middle_of_a_stream_slows_it_and_keeps_the_answer(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    slack.fail("chat.appendStream", "ratelimited", status=429, headers={"Retry-After": "1"})
    llm.push(streamed())
    await post(gw, mention("plan it", ts="1000.000100"))
    await slack.wait_for("chat.stopStream", seconds=10)
    [shown] = slack.bot_messages("C1")
    assert shown.text == ANSWER
    appends = [c.result.get("error") for c in slack.calls if c.method == "chat.appendStream"]
    assert appends[0] == "ratelimited" and len(appends) >= 2  # retried after Retry-After


async def test_a_refusal_in_one_channel_keeps_streaming_elsewhere(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    slack.stream_refusals["C1"] = "is_archived"
    llm.push(streamed(), streamed("Again: " + ANSWER), streamed("Elsewhere: " + ANSWER))
    await post(gw, mention("plan it", ts="1000.000100"))
    await wait_shown(slack, to_mrkdwn(ANSWER))
    [posted] = slack.calls_to("chat.postMessage")
    assert posted["channel"] == "C1" and posted["thread_ts"] == "1000.000100"
    await post(gw, mention("again", ts="1001.000100"))
    await wait_shown(slack, to_mrkdwn("Again: " + ANSWER))
    assert len(slack.calls_to("chat.startStream")) == 1  # not tried again in C1
    await post(gw, mention("plan it", channel="C2", ts="1002.000100"))
    stop = (await slack.wait_for("chat.stopStream"))[0]
    assert stop["channel"] == "C2"
    [shown] = slack.bot_messages("C2")
    assert shown.text == "Elsewhere: " + ANSWER and shown.ts == stop["ts"]
