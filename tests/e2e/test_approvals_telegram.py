"""Approvals end to end through Telegram: the real shell tool asks, python-telegram-bot renders
the buttons against the fake Bot API, and presses decide. Also a gateway killed while a request
is pending: after the restart the request is expired with a notice and never runs."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.app.app import App
from gateway.config import Settings
from gateway.sdk.messages import ChatRef
from tests.e2e.test_telegram import telegram_gateway
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.fakes.telegram import Call, FakeBotAPI
from tools.files.workspaces import Workspaces

ALICE, BOB, ADMIN = 42, 7, 1


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI) -> AsyncIterator[App]:
    sections: dict[str, Any] = {
        "access": {"admins": [f"telegram:{ADMIN}"], "rate_limit_per_minute": 0}
    }
    async with telegram_gateway(tmp_path, llm, tg, **sections) as app:
        (chat_dir(app.settings) / "build").mkdir(parents=True)
        (chat_dir(app.settings) / "build" / "out.o").write_text("object")
        yield app


def chat_dir(settings: Settings) -> Path:
    """The workspace of the test chat (Telegram chat 42), where its commands run."""
    chat = ChatRef(platform="telegram", chat_id="42")
    folder = Workspaces(settings.workspace, settings.tools.workspace_scope).folder(chat)
    return settings.workspace.joinpath(*folder)


def buttons(prompt: Call) -> dict[str, str]:
    keyboard = prompt.params["reply_markup"]["inline_keyboard"]
    return {b["text"]: b["callback_data"] for row in keyboard for b in row}


async def ask_to_clean(
    tg: FakeBotAPI, llm: ScriptedLLM, then: str = "Done.", *, within: float = 5.0
) -> Call:
    llm.push(Reply.call("shell", command="rm -rf build"), Reply.text(then))
    tg.push_message("clean the build", user_id=ALICE)
    [prompt] = await tg.wait_sent(1, within=within)
    assert "rm -rf build" in prompt.text and "Approval needed" in prompt.text
    assert "Runs in the sandbox." in prompt.text  # where the command will run
    return prompt


async def test_approve_runs_the_command_and_the_model_sees_its_output(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    prompt = await ask_to_clean(tg, llm, then="Cleaned.")
    assert set(buttons(prompt)) == {
        "Approve once",
        "Approve for session",
        "Deny",
        "Always allow in this chat",
    }
    assert (chat_dir(gw.settings) / "build").exists()  # nothing runs before the decision
    tg.push_press(buttons(prompt)["Approve once"], on=prompt.result, user_id=ALICE)
    sent = await tg.wait_sent(2)
    assert sent[-1].text == "Cleaned."
    assert not (chat_dir(gw.settings) / "build").exists()
    assert "[exit code 0]" in tool_results(llm.requests[1])[0]
    [edit] = await tg.wait_calls("editMessageText", 1)
    assert "Approved by Alice" in edit.params["text"]
    assert "reply_markup" not in edit.params


async def test_deny_by_typed_command_never_runs(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    prompt = await ask_to_clean(tg, llm, then="Left it alone.")
    request_id = buttons(prompt)["Deny"].split(":")[1]
    tg.push_message(f"/deny {request_id} still needed", user_id=ALICE)
    await tg.wait_for(lambda: "Left it alone." in tg.texts())
    assert (chat_dir(gw.settings) / "build" / "out.o").exists()
    assert tool_results(llm.requests[1]) == ["error: not run: denied by Alice: still needed"]
    edits = await tg.wait_calls("editMessageText", 1)
    assert "Denied by Alice: still needed" in edits[0].params["text"]


async def test_other_user_refused_double_press_and_forged_id(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    prompt = await ask_to_clean(tg, llm)
    data = buttons(prompt)
    tg.push_press(data["Approve once"], on=prompt.result, user_id=BOB, first_name="Bob")
    [refusal] = await tg.wait_calls("answerCallbackQuery", 1)
    assert refusal.params["text"] == "Only Alice or an admin can decide on this."
    assert refusal.params["show_alert"] == "true"
    assert (chat_dir(gw.settings) / "build").exists()
    tg.push_press(
        data["Approve once"].replace(data["Approve once"].split(":")[1], "0123456789"),
        on=prompt.result,
        user_id=ALICE,
    )
    forged = (await tg.wait_calls("answerCallbackQuery", 2))[1]
    assert "unknown or has expired" in forged.params["text"]
    # Two presses at once: one decision, the other is told it was already decided.
    tg.push_press(data["Approve once"], on=prompt.result, user_id=ALICE)
    tg.push_press(data["Deny"], on=prompt.result, user_id=ADMIN, first_name="Admin")
    answers = await tg.wait_calls("answerCallbackQuery", 4)
    toasts = {a.params["text"] for a in answers[2:]}
    assert toasts == {"Approved.", "Already decided: approved by Alice."}
    await tg.wait_sent(2)
    assert not (chat_dir(gw.settings) / "build").exists()
    assert len(tg.calls_of("editMessageText")) == 1


async def test_timeout_is_a_deny(tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI) -> None:
    sections: dict[str, Any] = {"approvals": {"timeout_seconds": 1}}
    async with telegram_gateway(tmp_path, llm, tg, **sections) as app:
        (chat_dir(app.settings) / "build").mkdir(parents=True)
        prompt = await ask_to_clean(tg, llm, then="Nobody approved.")
        await tg.wait_for(lambda: "Nobody approved." in tg.texts(), within=5)
        assert (chat_dir(app.settings) / "build").exists()
        assert "expired, not run" in tool_results(llm.requests[1])[0]
        [edit] = await tg.wait_calls("editMessageText", 1)
        assert "Expired, not run" in edit.params["text"]
        tg.push_press(buttons(prompt)["Approve once"], on=prompt.result, user_id=ALICE)
        [late] = await tg.wait_calls("answerCallbackQuery", 1)
        assert late.params["text"].startswith("Already decided: expired")


async def test_gateway_killed_while_pending_expires_the_request(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATGATE_")}
    env.update(
        CHATGATE_TELEGRAM__TOKEN=tg.token,
        CHATGATE_TELEGRAM__API_URL=tg.url,
        CHATGATE_TELEGRAM__POLL_TIMEOUT="1",
        CHATGATE_LLM__BASE_URL=llm.url,
        CHATGATE_LLM__MODEL="fake-model",
        CHATGATE_HTTP__ENABLED="false",
        CHATGATE_DATA_DIR=str(tmp_path / "data"),
    )
    workspace = chat_dir(Settings(data_dir=tmp_path / "data")) / "build"
    workspace.mkdir(parents=True)

    log = (tmp_path / "gateway.log").open("ab")  # read it when this test fails

    async def start() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway.app.cli",
            "run",
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=log,
        )

    first = await start()
    try:
        prompt = await ask_to_clean(tg, llm, within=30)  # a process starting on a busy machine
    finally:
        first.send_signal(signal.SIGKILL)
        await first.wait()
    second = await start()
    try:
        # The prompt is edited, or, when the killed process had not yet saved its message
        # id, the expiry is announced in a new message.
        notice = "Expired, not run (the gateway restarted before a decision)"

        def announced() -> bool:
            edits = [c.params["text"] for c in tg.calls_of("editMessageText")]
            return any(notice in t for t in [*edits, *tg.texts()])

        await tg.wait_for(announced, within=20)
        tg.push_press(buttons(prompt)["Approve once"], on=prompt.result, user_id=ALICE)
        [late] = await tg.wait_calls("answerCallbackQuery", 1, within=10)
        assert late.params["text"].startswith("Already decided: expired")
        assert workspace.exists()
    finally:
        second.send_signal(signal.SIGTERM)
        await asyncio.wait_for(second.wait(), 20)
        log.close()
