"""A reminder through the real Telegram adapter (python-telegram-bot against the fake Bot API):
`/remind` in a forum topic, the reminder lands in that topic, the Bot API's message id is the
run's receipt."""

from __future__ import annotations

import asyncio
from pathlib import Path

from gateway.app.app import App
from gateway.scheduling.jobs import RunStatus
from tests.fakes.llm import ScriptedLLM
from tests.fakes.telegram import FakeBotAPI
from tests.harness import gateway_settings

GROUP = -1001234567890


async def test_remind_in_a_forum_topic_arrives_in_that_topic(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    settings = gateway_settings(
        tmp_path,
        llm.url,
        telegram={"token": tg.token, "api_url": tg.url, "poll_timeout": 1},
        scheduler={"leader_ttl": 1.0},
    )
    app = App(settings)
    assert app.add_configured_adapters() == ["telegram"]
    await app.start()
    try:
        tg.push_message(
            "/remind@gw_bot 2s stretch", chat_id=GROUP, chat_type="supergroup", thread_id=11
        )
        (confirmation,) = await tg.wait_sent(1, GROUP)
        assert confirmation.text.startswith("Reminder ") and "set" in confirmation.text
        job = confirmation.text.split()[1]

        sent = await tg.wait_sent(2, GROUP, within=8)
        reminder = sent[1]
        assert reminder.text == "Reminder for Alice: stretch"
        assert reminder.params.get("message_thread_id") == 11
        assert tg.texts(42) == []  # nothing in the person's DM

        for _ in range(100):  # the run is logged just after the Bot API answered
            if runs := await app.scheduler.book.runs(job):
                break
            await asyncio.sleep(0.02)
        assert [r.status for r in runs] == [RunStatus.DELIVERED]
        assert runs[0].message_id == str(reminder.result["message_id"])
    finally:
        await app.stop()
