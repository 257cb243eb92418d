"""Pairing through Telegram: a stranger gets a code, an admin presses Approve or Deny on the
notice, and a grant written straight into the store (not sealed by the gateway) lets nobody in.
The real python-telegram-bot against the fake Bot API; the scripted LLM answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app.app import App
from gateway.intake.access import NOT_ALLOWED
from gateway.sdk.messages import UserRef
from gateway.store import keys
from tests.e2e.test_telegram import telegram_gateway
from tests.fakes.llm import Reply, ScriptedLLM
from tests.fakes.telegram import Call, FakeBotAPI

pytestmark = pytest.mark.e2e

ADMIN, STRANGER, OTHER = 1, 77, 88


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI) -> AsyncIterator[App]:
    access = {"admins": [f"telegram:{ADMIN}"], "unknown": "pair", "rate_limit_per_minute": 0}
    async with telegram_gateway(tmp_path, llm, tg, access=access) as app:
        yield app


def say(tg: FakeBotAPI, user: int, text: str, name: str = "Sam") -> int:
    return tg.push_message(text, user_id=user, chat_id=user, first_name=name, username=None)


async def taken(tg: FakeBotAPI, update_id: int) -> None:
    """Until the gateway fetched the update, and a moment for it to be handled."""
    await tg.wait_for(lambda: any(update_id in c.returned for c in tg.polls), within=15)
    await asyncio.sleep(0.5)


def buttons(notice: Call) -> dict[str, str]:
    keyboard = notice.params["reply_markup"]["inline_keyboard"]
    return {b["text"]: b["callback_data"] for row in keyboard for b in row}


async def pairing_notice(tg: FakeBotAPI, user: int, name: str) -> tuple[str, Call]:
    """The stranger's code (from the message they got) and the admin's notice of it."""
    say(tg, user, "hello, can I use you?", name)
    [told] = await tg.wait_sent(1, chat_id=user, within=15)
    code = told.text.split("Your pairing code is ", 1)[1][:6]
    notices = await tg.wait_sent(1, chat_id=ADMIN, within=15)
    [notice] = [n for n in notices if code in n.text]
    assert f"telegram:{user}" in notice.text and name in notice.text
    return code, notice


async def test_a_stranger_pairs_and_is_let_in_after_an_admins_press(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    code, notice = await pairing_notice(tg, STRANGER, "Sam")
    assert llm.requests == []  # nothing reached the model before the press
    say(tg, STRANGER, "still there?")  # a second message gets the same code, no new notice
    tg.push_press(buttons(notice)["Approve"], on=notice.result, user_id=ADMIN)
    sent = await tg.wait_sent(2, chat_id=STRANGER, within=15)
    assert sent[-1].text.startswith("An admin let you in.")
    assert len([c for c in tg.sent(chat_id=ADMIN) if "Pairing request" in c.text]) == 1
    llm.push(Reply.text("Welcome, Sam."))
    say(tg, STRANGER, "hello again")
    await tg.wait_for(lambda: "Welcome, Sam." in tg.texts(), within=15)
    [edit] = await tg.wait_calls("editMessageText", 1)
    assert "Approved" in edit.params["text"] and "telegram:77" in edit.params["text"]
    grant = await gw.pairing.book.granted(tg_user(STRANGER))
    assert grant is not None and grant.by == f"telegram:{ADMIN}" and grant.code == code


async def test_a_denied_stranger_is_not_let_in(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    _, notice = await pairing_notice(tg, OTHER, "Mallory")
    tg.push_press(buttons(notice)["Deny"], on=notice.result, user_id=ADMIN)
    sent = await tg.wait_sent(2, chat_id=OTHER, within=15)
    assert sent[-1].text == NOT_ALLOWED
    say(tg, OTHER, "please?", "Mallory")
    await taken(tg, say(tg, OTHER, "pretty please?", "Mallory"))
    assert llm.requests == []
    assert not [c for c in tg.sent(chat_id=ADMIN) if "Pairing request" in c.text][1:]
    assert await gw.pairing.book.granted(tg_user(OTHER)) is None


async def test_only_an_admin_can_press_and_the_command_decides_too(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    code, notice = await pairing_notice(tg, STRANGER, "Sam")
    tg.push_press(buttons(notice)["Approve"], on=notice.result, user_id=STRANGER)
    [answer] = await tg.wait_calls("answerCallbackQuery", 1)
    assert answer.params.get("show_alert") and "Only an admin" in answer.params["text"]
    tg.push_message(f"/pairing approve {code}", user_id=ADMIN, chat_id=ADMIN, first_name="Ada")
    await tg.wait_for(lambda: any("Approved: Sam" in t for t in tg.texts()), within=15)
    tg.push_message("/pairing list", user_id=ADMIN, chat_id=ADMIN, first_name="Ada")
    await tg.wait_for(lambda: any("Let in by pairing:" in t for t in tg.texts()), within=15)
    assert "Let in by pairing:\n• Sam (telegram:77), approved by Ada" in tg.texts()[-1]
    tg.push_message("/pairing revoke telegram:77", user_id=ADMIN, chat_id=ADMIN, first_name="Ada")
    await tg.wait_for(lambda: any("Revoked: telegram:77" in t for t in tg.texts()), within=15)
    assert await gw.pairing.book.granted(tg_user(STRANGER)) is None


async def test_a_grant_forged_in_the_store_is_not_honoured(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    # What a command that can write the store could write: the grant's shape, a made-up seal.
    user = tg_user(STRANGER).model_dump(mode="json")
    forged = {"user": user, "by": f"telegram:{ADMIN}", "by_label": "Ada", "at": 1.0, "code": "X"}
    envelope = json.dumps({"v": forged, "mac": "0" * 64})
    await gw.store.hset(keys.PAIRING_GRANTS, f"telegram:{STRANGER}", envelope)
    code, _ = await pairing_notice(tg, STRANGER, "Sam")  # asked to pair, not let in
    assert llm.requests == [] and len(code) == 6
    assert gw.metrics.counter("approvals_tampered_total", kind="pairing grant") >= 1


def tg_user(user_id: int) -> UserRef:
    return UserRef(platform="telegram", user_id=str(user_id))
