"""An approval raised from an API session reaches a Telegram admin (issue 19): the relay
opens the admin's direct chat, the admin presses Approve there through python-telegram-bot
against the fake Bot API, and the waiting API response carries on with the command's result."""

from __future__ import annotations

import asyncio
from pathlib import Path

from openai import AsyncOpenAI

from tests.e2e.test_approvals_telegram import buttons
from tests.e2e.test_web_api import api_chat
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.fakes.telegram import FakeBotAPI
from tests.web_kit import API_KEY, base_url, build_dir, web_gateway, web_settings

ADMIN = 1


async def test_an_api_approval_is_decided_by_a_telegram_admin(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    settings = web_settings(
        tmp_path,
        llm.url,
        telegram={"token": tg.token, "api_url": tg.url, "poll_timeout": 1},
        access={"admins": [f"telegram:{ADMIN}"], "rate_limit_per_minute": 0},
    )
    async with web_gateway(settings) as app:
        client = AsyncOpenAI(base_url=f"{base_url(app)}/v1", api_key=API_KEY, max_retries=0)
        build = build_dir(app, api_chat())
        llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("All clean."))
        answer = asyncio.create_task(
            client.chat.completions.create(
                model="chatgate", messages=[{"role": "user", "content": "clean up"}]
            )
        )
        [prompt] = await tg.wait_sent(1)
        assert prompt.params["chat_id"] == ADMIN  # the admin's direct chat
        assert "rm -rf build" in prompt.text and "api:bob" in prompt.text
        assert not answer.done()
        tg.push_press(buttons(prompt)["Approve once"], on=prompt.result, user_id=ADMIN)
        reply = await asyncio.wait_for(answer, 20)
        content = reply.choices[0].message.content or ""
        assert "Approved by" in content and content.endswith("All clean.")
        assert "[exit code 0]" in tool_results(llm.requests[1])[0]
        assert not build.exists()
        await tg.wait_for(lambda: any("Approved" in c.text for c in tg.calls_of("editMessageText")))
        await client.close()
