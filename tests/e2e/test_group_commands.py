"""Chat commands in a Telegram group (issue 22 finding 8), through python-telegram-bot against
the fake Bot API: /forget and /new reset everyone's conversation, so only admins may use them
there; /stop ends a running request only for the person who asked or an admin. Bare commands
(`/forget`) are taken like `/forget@gw_bot`; a bare command the bot does not know may be another
bot's and gets no answer."""

from __future__ import annotations

from gateway.app.app import App
from gateway.intake.commands import MODERATORS_ONLY, NOT_YOURS
from tests.e2e.test_approvals_standing import ADMIN, ALICE, BOB, IN_GROUP, NAMES, gw, say
from tests.fakes.llm import Reply, ScriptedLLM
from tests.fakes.telegram import FakeBotAPI

__all__ = ["gw"]  # the Telegram gateway with an admin, shared with the standing-approval tests


async def test_only_an_admin_may_forget_or_reset_a_group(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    llm.push(
        Reply.call("memory", action="add", text="the deploy window is Friday"),
        Reply.text("Noted for the group."),
    )
    assert await say(tg, "@gw_bot remember the deploy window", user=ADMIN) == (
        "Noted for the group."
    )
    for command in ("forget", "new"):
        refused = await say(tg, f"/{command}", user=BOB)
        assert refused == MODERATORS_ONLY.format(name=command)
    assert "the deploy window is Friday" in await say(tg, "/memory", user=BOB)
    llm.push(Reply.text("Still here."))
    await say(tg, "@gw_bot what did we say?", user=BOB)
    users = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    assert len(users) == 2 and "remember the deploy window" in users[0]  # history kept

    sent = len(tg.sent())
    tg.push_message("/weather Berlin", user_id=BOB, first_name=NAMES[BOB], **IN_GROUP)
    assert (await say(tg, "/forget@gw_bot", user=ADMIN)).startswith("Forgot this chat")
    assert len(tg.sent()) == sent + 1  # nothing for /weather: it may be another bot's
    assert "deploy window" not in await say(tg, "/memory@gw_bot", user=BOB)


async def test_stop_is_for_the_requester_or_an_admin(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    llm.push(Reply.text("the long answer", delay=2.0))
    tg.push_message(
        "@gw_bot write the long answer", user_id=ALICE, first_name=NAMES[ALICE], **IN_GROUP
    )
    await tg.wait_for(lambda: len(llm.requests) == 1, within=10)
    assert await say(tg, "/stop@gw_bot", user=BOB) == NOT_YOURS
    await tg.wait_for(lambda: "the long answer" in tg.texts(), within=10)  # not stopped

    for who in (ALICE, ADMIN):
        asked = len(llm.requests)
        llm.push(Reply.text("never shown", delay=5.0))
        tg.push_message("@gw_bot again", user_id=ALICE, first_name=NAMES[ALICE], **IN_GROUP)
        await tg.wait_for(lambda: len(llm.requests) > asked, within=10)  # noqa: B023
        assert await say(tg, "/stop@gw_bot", user=who) == "Stopped."
    assert "never shown" not in tg.texts()
