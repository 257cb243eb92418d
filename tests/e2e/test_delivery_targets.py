"""Deliveries to other chats: a job made on Telegram delivers to a Slack channel named as a
home channel; a failed delivery (a platform error, a target the access rules refuse, a platform
not running) is reported to the job's owner once per streak and shown in the console's job
view; send_message reaches the admins and checks its targets. The real python-telegram-bot and
slack_sdk against their fakes, gateways with both platforms (or one) and the scheduler."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app.app import App
from gateway.config import Settings
from gateway.scheduling.jobs import RunStatus
from gateway.sdk.messages import UserRef
from gateway.web import auth
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
from tests.web_kit import ADMIN_TOKEN, base_url

pytestmark = pytest.mark.e2e

ADMIN, MEMBER = 42, 7  # Telegram users; the admin on Slack is U1
OPERATOR = UserRef(platform="web", user_id="operator")  # presses "run now" in the console


def settings_for(
    tmp_path: Path,
    llm: ScriptedLLM,
    tg: FakeBotAPI,
    slack: FakeSlack | None,
    **slack_options: Any,
) -> Settings:
    """Telegram, and Slack unless `slack` is None; the console signs in with ADMIN_TOKEN."""
    platforms: dict[str, Any] = {
        "telegram": {"token": tg.token, "api_url": tg.url, "poll_timeout": 1}
    }
    if slack is not None:
        platforms["slack"] = {
            "bot_token": BOT_TOKEN,
            "signing_secret": SECRET,
            "api_url": slack.api_url,
            **slack_options,
        }
    return gateway_settings(
        tmp_path,
        llm.url,
        http={"enabled": True, "port": 0},
        access={"admins": [f"telegram:{ADMIN}", "slack:U1"], "rate_limit_per_minute": 0},
        scheduler={"retry_base_delay": 0.05, "delivery_attempts": 2},
        web={"admin_token": ADMIN_TOKEN, "chat": False},
        **platforms,
    )


@pytest.fixture
async def gw(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> AsyncIterator[App]:
    async with configured_gateway(settings_for(tmp_path, llm, tg, slack)) as app:
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
    await until(lambda: _runs(gw, job_id))  # logged once the report went out
    [run] = await gw.scheduler.book.runs(job_id)  # the console's job page lists it
    assert run.status is RunStatus.FAILED and "channel_not_found" in (run.error or "")
    assert run.reported == "chat"


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


async def job_for_the_team(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> str:
    """With Telegram and Slack running, an admin names Slack's C1 "team" and member 7 has a
    daily reminder made there for it; returns the job's id."""
    async with configured_gateway(settings_for(tmp_path, llm, tg, slack)) as app:
        await set_home(app, slack, "team")
        llm.push(
            Reply.call(
                "schedule_job", text="Standup in 5.", when="every day at 09:00", deliver_to="team"
            ),
            Reply.text("Done."),
        )
        tg.push_message("remind the team of the standup", user_id=MEMBER, chat_id=MEMBER)
        await tg.wait_for(lambda: "Done." in tg.texts(chat_id=MEMBER), within=20)
        [(spec, _)] = await app.scheduler.jobs(None)
        assert spec.deliver_to is not None and spec.deliver_to.address == "slack:C1"
        return spec.id


def reports(tg: FakeBotAPI) -> list[str]:
    return [t for t in tg.texts(chat_id=MEMBER) if t.startswith("I could not deliver")]


async def run_now(app: App, job_id: str, runs: int) -> None:
    """The console's "run now"; waits until the job has `runs` logged runs."""
    await app.scheduler.run_now(job_id, user=OPERATOR)

    async def logged() -> bool:
        return len(await app.scheduler.book.runs(job_id)) >= runs

    await until(logged)


async def console_page(app: App, path: str) -> str:
    """The console page at `path`, read by an operator signed in with the admin token."""
    # The console's cookies are for 127.0.0.1, which aiohttp keeps only in an "unsafe" jar.
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(base_url(app), cookie_jar=jar) as http:
        form = await http.get("/admin/login")
        presign = form.cookies[auth.PRESIGN_COOKIE].value
        signed = await http.post(
            "/admin/login", data={"token": ADMIN_TOKEN, auth.CSRF_FIELD: presign}
        )
        assert signed.status == 200 and signed.url.path == "/admin"
        page = await http.get(path)
        assert page.status == 200
        return re.sub(r"\s+", " ", await page.text())


async def test_a_delivery_refused_by_the_access_rules_is_reported_once_and_shown_in_the_console(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> None:
    job_id = await job_for_the_team(tmp_path, llm, tg, slack)
    # Restarted with Slack limited to another channel: C1 refuses the member's deliveries.
    narrowed = settings_for(tmp_path, llm, tg, slack, allowed_channels=["C9"])
    async with configured_gateway(narrowed) as app:
        await run_now(app, job_id, 1)
        await tg.wait_for(lambda: len(reports(tg)) == 1, within=10)
        [report] = reports(tg)
        assert f"(job {job_id}) to slack:C1" in report
        assert "slack:C1 does not accept messages from telegram:7" in report
        [first] = await app.scheduler.book.runs(job_id)
        assert first.status is RunStatus.FAILED and first.reported == "chat"
        assert "does not accept messages from telegram:7" in (first.error or "")

        # The next failing run is logged, not reported again: one report per streak.
        await run_now(app, job_id, 2)
        second = (await app.scheduler.book.runs(job_id))[-1]
        assert second.status is RunStatus.FAILED and second.reported is None
        assert len(reports(tg)) == 1
        assert not any(p.get("text") == "Standup in 5." for p in slack.calls_to("chat.postMessage"))

        # The owner's /jobs says so too.
        tg.push_message("/jobs", user_id=MEMBER, chat_id=MEMBER)
        await tg.wait_for(lambda: tg.texts(chat_id=MEMBER)[-1].startswith("Scheduled jobs"))
        listed = tg.texts(chat_id=MEMBER)[-1]
        assert f"{job_id} [message]" in listed and "(last run failed: slack:C1 refused: " in listed

        job_page = await console_page(app, f"/admin/scheduler/{job_id}")
        assert "delivers to <code>slack:C1</code>" in job_page
        assert (
            "The last run was not delivered: slack:C1 refused: slack:C1 does not accept "
            "messages from telegram:7"
        ) in job_page
        assert job_page.count('<span class="badge bad">failed</span>') == 2
        assert job_page.count("the job's chat") == 1  # the first run's report
        jobs_page = await console_page(app, "/admin/scheduler")
        assert f"<code>{job_id}</code>" in jobs_page and ">failing</span>" in jobs_page


async def test_a_delivery_to_a_platform_not_running_is_reported_and_a_success_ends_the_streak(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, slack: FakeSlack
) -> None:
    job_id = await job_for_the_team(tmp_path, llm, tg, slack)
    # Restarted without Slack: the target cannot be reached from this gateway.
    async with configured_gateway(settings_for(tmp_path, llm, tg, None)) as app:
        await run_now(app, job_id, 1)
        await tg.wait_for(lambda: len(reports(tg)) == 1, within=10)
        assert "slack is not running in this gateway" in reports(tg)[0]
        assert (await app.scheduler.book.state(job_id)).failing is not None
    # Slack is back: the run gets through, and the failure is no longer shown.
    async with configured_gateway(settings_for(tmp_path, llm, tg, slack)) as app:
        await run_now(app, job_id, 2)
        delivered = (await app.scheduler.book.runs(job_id))[-1]
        assert delivered.status is RunStatus.DELIVERED
        assert (await app.scheduler.book.state(job_id)).failing is None
        assert "The last run was not delivered" not in await console_page(
            app, f"/admin/scheduler/{job_id}"
        )
    # Failing again after that success is a new streak, reported again.
    async with configured_gateway(settings_for(tmp_path, llm, tg, None)) as app:
        await run_now(app, job_id, 3)
        await tg.wait_for(lambda: len(reports(tg)) == 2, within=10)
