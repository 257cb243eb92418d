"""Deliveries to other chats: a job made on Telegram delivers to a Slack channel named as a
home channel, a failed delivery is reported to the job's owner, and send_message reaches the
admins and checks its targets. The real python-telegram-bot and slack_sdk against their fakes,
one gateway with both platforms and the scheduler."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.app.app import App
from gateway.scheduling.jobs import RunStatus
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.fakes.slack import (
    BOT_TOKEN,
    SECRET,
    FakeSlack,
    deliver,
    event_callback,
    events_url,
    form_body,
    mention,
    slash_command,
)
from tests.fakes.telegram import FakeBotAPI
from tests.harness import configured_gateway, gateway_settings

pytestmark = pytest.mark.e2e

ADMIN, MEMBER = 42, 7  # Telegram users; the admin on Slack is U1


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> AsyncIterator[App]:
    settings = gateway_settings(
        tmp_path,
        llm.url,
        http={"enabled": True, "port": 0},
        telegram={"token": tg.token, "api_url": tg.url, "poll_timeout": 1},
        slack={"bot_token": BOT_TOKEN, "signing_secret": SECRET, "api_url": slack.api_url},
        access={"admins": [f"telegram:{ADMIN}", "slack:U1"], "rate_limit_per_minute": 0},
        scheduler={"retry_base_delay": 0.05, "delivery_attempts": 2},
    )
    async with configured_gateway(settings) as app:
        yield app


async def set_home(gw: App, slack: FakeSlack, name: str) -> None:
    """An admin types `/chatgate /sethome NAME` in Slack channel C1."""
    body = form_body(slash_command(f"/sethome {name}"))
    assert (await deliver(events_url(gw), body, form=True)).status == 200
    await until(lambda: _posted(slack, f"This chat is the home channel '{name}'"))


async def _posted(slack: FakeSlack, fragment: str) -> bool:
    return any(fragment in str(p.get("text")) for p in slack.calls_to("chat.postMessage"))


async def until(check: Any, seconds: float = 20) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.1)


async def test_a_job_made_on_telegram_delivers_to_a_slack_home_channel(
    gw: App, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> None:
    await set_home(gw, slack, "team")
    llm.push(
        Reply.call(
            "schedule_job", kind="message", text="Daily report: all green.", when="in 2 seconds",
            deliver_to="team",
        ),
        Reply.text("Scheduled for the team channel."),
    )  # fmt: skip
    tg.push_message("post the daily report to the team channel", user_id=ADMIN, chat_id=ADMIN)
    await tg.wait_for(lambda: "Scheduled for the team channel." in tg.texts(), within=20)
    assert "It is delivered to slack:C1." in tool_results(llm.requests[1])[0]
    posted = await slack.wait_for_post("Daily report: all green.", 20)
    assert posted["channel"] == "C1"
    [(spec, _)] = await gw.scheduler.jobs(None)
    assert spec.target.address == f"telegram:{ADMIN}" and spec.deliver_to is not None
    await until(lambda: _runs(gw, spec.id))
    [run] = await gw.scheduler.book.runs(spec.id)
    assert run.status is RunStatus.DELIVERED and run.message_id
    assert not any("Daily report" in t for t in tg.texts())  # not in the chat it was made in


async def _runs(gw: App, job_id: str) -> bool:
    return bool(await gw.scheduler.book.runs(job_id))


async def test_a_failed_delivery_is_reported_to_the_jobs_owner(
    gw: App, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> None:
    await set_home(gw, slack, "team")
    slack.fail("chat.postMessage", "channel_not_found", times=5)
    llm.push(
        Reply.call("schedule_job", text="Standup in 5.", when="in 2 seconds", deliver_to="team"),
        Reply.text("Done."),
    )
    tg.push_message("remind the team", user_id=ADMIN, chat_id=ADMIN)
    await tg.wait_for(
        lambda: any("could not deliver" in t and "to slack:C1" in t for t in tg.texts()),
        within=30,
    )
    job_id = tool_results(llm.requests[1])[0].split("Scheduled job ", 1)[1].split()[0]
    [run] = await gw.scheduler.book.runs(job_id)  # the console's job page lists it
    assert run.status is RunStatus.FAILED and "channel_not_found" in (run.error or "")


async def test_send_message_reaches_the_admins_and_checks_its_target(
    gw: App, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> None:
    llm.push(
        Reply.call("send_message", text="Sam needs a hand with the VPN."),
        Reply.text("I told the admins."),
        Reply.call("send_message", text="hi", to="slack:C1"),
        Reply.text("I could not."),
    )
    tg.push_message("tell the admins I need help with the VPN", user_id=MEMBER, chat_id=MEMBER)
    await tg.wait_for(lambda: "I told the admins." in tg.texts(), within=20)
    # Both admins: Telegram 42 in its direct chat, Slack U1 in a DM the adapter opened.
    assert "Sam needs a hand with the VPN." in tg.texts(chat_id=ADMIN)
    await slack.wait_for_post("Sam needs a hand with the VPN.", 10)
    tg.push_message("now post hi in slack:C1", user_id=MEMBER, chat_id=MEMBER)
    await tg.wait_for(lambda: "I could not." in tg.texts(), within=20)
    refused = tool_results(llm.requests[3])[0]
    assert refused.startswith("error: not sent: the gateway does not know the chat slack:C1")
    # Once the bot talked in C1, the chat is known, but only admins may name it.
    llm.push(Reply.text("Hello, Slack."))
    mention_hi = json.dumps(event_callback(mention("hi")))
    assert (await deliver(events_url(gw), mention_hi)).status == 200
    await slack.wait_for_post("Hello, Slack.", 20)
    llm.push(Reply.call("send_message", text="hi", to="slack:C1"), Reply.text("Still no."))
    tg.push_message("post hi in slack:C1 again", user_id=MEMBER, chat_id=MEMBER)
    await tg.wait_for(lambda: "Still no." in tg.texts(), within=20)
    refused = tool_results(llm.requests[-1])[0]
    assert refused.startswith("error: not sent: only admins can deliver to slack:C1")
    llm.push(Reply.call("send_message", text="Deploy done.", to="slack:C1"), Reply.text("Sent."))
    tg.push_message("post 'Deploy done.' in slack:C1", user_id=ADMIN, chat_id=ADMIN)
    await slack.wait_for_post("Deploy done.", 20)
