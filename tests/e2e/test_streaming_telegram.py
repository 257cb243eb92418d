"""Streamed replies on Telegram end to end: python-telegram-bot against the fake Bot API, a
scripted model that streams its answer in timed chunks. Drafts and one final message in
private chats, post-then-edit in groups and topics, rate limits, long replies, text-mode
tool calls that must never show, progress lines, /stop and an approval in the middle."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.app.app import App
from gateway.turn.runner import INTERRUPTED_NOTE
from tests.e2e.test_telegram import GROUP, telegram_gateway
from tests.fakes.llm import Reply, ScriptedLLM
from tests.fakes.slack import slack_gateway as configured_gateway
from tests.fakes.telegram import Call, FakeBotAPI, parse_html
from tests.harness import gateway_settings

FAST = {"interval_ms": 150, "first_delay_ms": 0}
GROUP_CHAT = {"chat_id": GROUP, "chat_type": "supergroup"}
ANSWER = " ".join(f"word{n}" for n in range(30)) + " — done."


def streamed(text: str = ANSWER, chunks: int = 15, delay: float = 0.06) -> Reply:
    return Reply.streamed(text, chunks=chunks, delay=delay)


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI) -> AsyncIterator[App]:
    async with telegram_gateway(tmp_path, llm, tg, streaming=FAST) as app:
        yield app


def drafts(tg: FakeBotAPI) -> list[Call]:
    return [c for c in tg.calls_of("sendMessageDraft") if c.status == 200]


def visible(call: Call) -> str:
    return parse_html(call.text) if call.params.get("parse_mode") == "HTML" else call.text


def growing(texts: list[str]) -> bool:
    return all(b.startswith(a.rstrip("…").rstrip()) for a, b in itertools.pairwise(texts))


# -- private chats: drafts, then one message ---------------------------------------------------


async def test_dm_streams_drafts_then_sends_one_message(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    llm.push(streamed())
    tg.push_message("tell me")
    [final] = await tg.wait_sent(1)
    assert final.text == ANSWER
    shown = drafts(tg)
    assert len(shown) >= 3
    assert len({c.params["draft_id"] for c in shown}) == 1  # one draft id for the reply
    texts = [visible(c) for c in shown]
    assert growing(texts) and ANSWER.startswith(texts[0]) and texts[0]
    assert tg.calls_of("editMessageText") == []
    assert len(tg.calls_of("sendMessage")) == 1
    # The history holds the answer once, whole.
    llm.push(Reply.text("ok"))
    tg.push_message("thanks")
    await tg.wait_sent(2)
    answers = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "assistant"]
    assert answers == [ANSWER]


async def test_dm_defaults_a_fast_reply_goes_out_whole(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    async with telegram_gateway(tmp_path, llm, tg):  # the production streaming settings
        llm.push(Reply.text("Quick answer."))
        tg.push_message("hi")
        [final] = await tg.wait_sent(1)
        assert final.text == "Quick answer."
        assert tg.calls_of("sendMessageDraft") == []
        llm.push(streamed(chunks=20, delay=0.1))  # two seconds of writing
        tg.push_message("and a long one")
        await tg.wait_sent(2)
        assert len(drafts(tg)) >= 1
        assert tg.texts()[-1] == ANSWER


async def test_refused_drafts_fall_back_to_editing(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    tg.drafts_supported = False  # an older Bot API server
    llm.push(streamed(), streamed("Second " + ANSWER))
    tg.push_message("one")
    await tg.wait_for(lambda: any(c.text == ANSWER for c in tg.calls_of("editMessageText")))
    [first] = tg.sent()
    assert ANSWER.startswith(first.text) and first.text != ANSWER
    assert len(tg.calls_of("sendMessageDraft")) == 1  # tried once, not for every update
    tg.push_message("two")
    await tg.wait_for(
        lambda: tg.shown(42, tg.sent()[-1].result["message_id"]) == "Second " + ANSWER
    )
    assert len(tg.calls_of("sendMessageDraft")) == 1  # the chat is known to refuse them now


# -- groups and topics: post, then edit ----------------------------------------------------------


async def test_group_posts_then_edits_into_the_final_text(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    llm.push(streamed())
    asked = tg.push_message("@gw_bot tell me", **GROUP_CHAT)
    question = tg.pushed[asked]["message"]["message_id"]
    await tg.wait_for(lambda: bool(tg.sent()) and final_text(tg) == ANSWER)
    [first] = tg.sent()
    assert first.params["reply_parameters"]["message_id"] == question
    edits = [c for c in tg.calls_of("editMessageText") if c.status == 200]
    assert len(edits) >= 2
    assert all(c.params["message_id"] == first.result["message_id"] for c in edits)
    assert growing([first.text, *(c.text for c in edits)])
    assert tg.calls_of("sendMessageDraft") == []


async def test_topic_streams_in_its_thread(gw: App, tg: FakeBotAPI, llm: ScriptedLLM) -> None:
    llm.push(streamed())
    tg.push_message("@gw_bot in the topic", thread_id=11, **GROUP_CHAT)
    await tg.wait_for(lambda: bool(tg.sent()) and final_text(tg) == ANSWER)
    [first] = tg.sent()
    assert first.params["message_thread_id"] == 11
    assert tg.calls_of("sendMessageDraft") == []


def final_text(tg: FakeBotAPI) -> str | None:
    first = tg.sent()[0]
    return tg.shown(first.params["chat_id"], first.result["message_id"])


# -- rate limits and length ----------------------------------------------------------------------


async def test_429_on_a_draft_slows_down_and_loses_nothing(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    tg.fail("sendMessageDraft", 429, "Too Many Requests: retry after 1", retry_after=1, times=1)
    llm.push(streamed(chunks=20, delay=0.08))
    tg.push_message("go")
    [final] = await tg.wait_sent(1)
    assert final.text == ANSWER
    calls = tg.calls_of("sendMessageDraft")
    assert calls[0].status == 429 and calls[1].status == 200
    # The stream waited for the rate limit instead of hammering: no draft within that second.
    assert calls[1].at - calls[0].at >= 1.0


async def test_429_on_an_edit_in_a_group_keeps_the_final_text(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    tg.fail("editMessageText", 429, "Too Many Requests: retry after 1", retry_after=1, times=1)
    llm.push(streamed())
    tg.push_message("@gw_bot go", **GROUP_CHAT)
    await tg.wait_for(lambda: bool(tg.sent()) and final_text(tg) == ANSWER, within=8)
    assert tg.calls_of("editMessageText")[0].status == 429
    assert len(tg.sent()) == 1


def long_reply() -> str:
    prose = "\n\n".join(f"Paragraph {n}: " + "lorem ipsum " * 25 for n in range(10))
    code = "\n".join(f"    print({n} < {n + 1} & True)" for n in range(120))
    return f"{prose}\n\n```python\n{code}\n```\n\nThat is all."


async def test_a_reply_passing_4096_goes_on_in_a_new_message(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    text = long_reply()
    llm.push(streamed(text, chunks=40, delay=0.03))
    tg.push_message("@gw_bot the long one", **GROUP_CHAT)
    await tg.wait_for(lambda: len(tg.sent()) >= 2 and "That is all." in (last_shown(tg) or ""))
    parts = [parse_html(tg.shown(GROUP, c.result["message_id"]) or "") for c in tg.sent()]
    assert len(parts) == 2
    assert all(len(p) <= 4096 for p in parts)
    # Every state the fake accepted parsed as Telegram HTML, and the code moved on intact.
    assert all(c.status == 200 for c in tg.calls if c.method in ("sendMessage", "editMessageText"))
    joined = "\n".join(parts)
    for n in range(120):
        assert f"print({n} < {n + 1} & True)" in joined
    last_part = tg.sent()[-1]
    assert "<pre><code" in (tg.messages[(GROUP, last_part.result["message_id"])]["text"])


def last_shown(tg: FakeBotAPI) -> str | None:
    last = tg.sent()[-1]
    return tg.shown(last.params["chat_id"], last.result["message_id"])


async def test_a_deleted_streaming_message_is_posted_again(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    llm.push(streamed(chunks=20, delay=0.08))
    tg.push_message("@gw_bot go", **GROUP_CHAT)
    [first] = await tg.wait_sent(1)
    tg.delete(GROUP, first.result["message_id"])
    await tg.wait_for(lambda: len(tg.sent()) == 2 and last_shown(tg) == ANSWER)
    # Nobody saw an error: no message mentions one.
    assert all("error" not in (c.text or "").lower() for c in tg.sent())


# -- what must never show ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call_text",
    [
        '<tool_call>{"name": "read_file", "arguments": {"path": "notes.md"}}</tool_call>',
        '```json\n{"name": "read_file", "arguments": {"path": "notes.md"}}\n```',
    ],
)
async def test_text_mode_tool_calls_never_flash(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, call_text: str
) -> None:
    async with text_calls_gateway(tmp_path, llm, tg):
        pieces = ["Let me ", "look at ", "your notes.\n"]
        pieces += [call_text[i : i + 4] for i in range(0, len(call_text), 4)]
        llm.push(Reply(pieces=pieces, chunk_delay=0.03), streamed("The notes are empty."))
        tg.push_message("@gw_bot what is in my notes?", **GROUP_CHAT)
        await tg.wait_for(lambda: bool(tg.sent()) and final_text(tg) == "The notes are empty.")
        seen = [c.text for c in tg.calls if c.method in ("sendMessage", "editMessageText")]
        assert any("Let me look" in text for text in seen)  # the prose did stream
        assert not any("tool_call" in t or "{" in t or "arguments" in t for t in seen)
        # Once the call was read, its line replaced the prose; the answer replaced both.
        assert any("Reading <code>notes.md</code>" in t for t in seen)


def text_calls_gateway(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> contextlib.AbstractAsyncContextManager[App]:
    """A Telegram gateway whose model writes its tool calls as text."""
    telegram = {"token": tg.token, "api_url": tg.url, "poll_timeout": 1}
    settings = gateway_settings(tmp_path, llm.url, telegram=telegram, streaming=FAST)
    settings.llm.tool_call_format = "text"
    return configured_gateway(settings)


async def test_progress_lines_while_tools_run_then_the_answer(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    command = "sleep 0.6; echo API_TOKEN=sk-abcdefghijklmnopqrstuvwx"
    llm.push(Reply.call("shell", command=command), streamed("It printed a token."))
    tg.push_message("@gw_bot run it", **GROUP_CHAT)
    await tg.wait_for(lambda: bool(tg.sent()) and final_text(tg) == "It printed a token.")
    first = tg.sent()[0]
    assert "Running shell: <code>sleep 0.6; echo API_TOKEN=***</code>" in first.text
    assert "sk-abc" not in " ".join(c.text for c in tg.calls)
    assert len(tg.sent()) == 1  # the progress line became the answer


# -- /stop and approvals --------------------------------------------------------------------


async def test_stop_ends_the_stream_with_what_was_written(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    llm.push(streamed(chunks=30, delay=0.1))
    tg.push_message("write a lot")
    await tg.wait_calls("sendMessageDraft", 3)
    tg.push_message("/stop")
    await tg.wait_for(lambda: any(t.endswith("(stopped)") for t in tg.texts()))
    [stopped] = [t for t in tg.texts() if t.endswith("(stopped)")]
    written = stopped.removesuffix("(stopped)").strip()
    assert written and ANSWER.startswith(written) and written != ANSWER
    await tg.wait_for(lambda: "Stopped." in tg.texts())
    await asyncio.sleep(0.5)
    assert ANSWER not in tg.texts()  # the rest of the answer never came
    # The next turn's model sees what was written, marked as interrupted.
    llm.push(Reply.text("ok"))
    tg.push_message("go on")
    await tg.wait_for(lambda: "ok" in tg.texts())
    answers = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "assistant"]
    assert answers[-1].startswith(written) and INTERRUPTED_NOTE in answers[-1]


async def test_an_approval_in_the_middle_finishes_first_and_the_reply_goes_on_below(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    async with telegram_gateway(tmp_path, llm, tg, streaming=FAST) as app:
        (app.settings.workspace / f"telegram-{GROUP}" / "build").mkdir(parents=True)
        narration = Reply(
            content="I will clean the build folder now.",
            chunks=8,
            chunk_delay=0.06,
            tool_calls=[("shell", {"command": "rm -rf build"})],
        )
        llm.push(narration, streamed("Cleaned it up."))
        tg.push_message("@gw_bot clean the build", **GROUP_CHAT)
        await tg.wait_for(lambda: any("Approval needed" in t for t in tg.texts()), within=8)
        prompt = next(c for c in tg.sent() if "Approval needed" in c.text)
        # What streamed before the prompt (narration, then the tool line) was taken back.
        before = [c for c in tg.sent() if c.result["message_id"] < prompt.result["message_id"]]
        assert all(tg.shown(GROUP, c.result["message_id"]) is None for c in before)
        keyboard = prompt.params["reply_markup"]["inline_keyboard"]
        approve = next(b["callback_data"] for row in keyboard for b in row if "once" in b["text"])
        tg.push_press(approve, on=prompt.result)
        await tg.wait_for(lambda: last_shown(tg) == "Cleaned it up.", within=8)
        answer = tg.sent()[-1]
        assert answer.result["message_id"] > prompt.result["message_id"]


async def test_a_question_in_the_middle_comes_on_its_own_and_the_reply_streams_after(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    asking = Reply(
        content="Let me ask you something first.",
        chunks=8,
        chunk_delay=0.06,
        tool_calls=[("clarify", {"question": "Which colour?", "choices": ["red", "blue"]})],
    )
    llm.push(asking, streamed("Painting it red."))
    tg.push_message("paint the shed")
    [question] = await tg.wait_sent(1)
    assert question.text.startswith("Which colour?")
    before = {c.params["draft_id"] for c in drafts(tg)}
    keyboard = question.params["reply_markup"]["inline_keyboard"]
    red = next(b["callback_data"] for row in keyboard for b in row if b["text"] == "red")
    tg.push_press(red, on=question.result)
    sent = await tg.wait_sent(2)
    assert sent[-1].text == "Painting it red."
    after = [c for c in drafts(tg) if c.at > question.at]
    assert after and {c.params["draft_id"] for c in after}.isdisjoint(before)


async def test_a_dm_reply_passing_4096_is_sent_in_two_messages_with_a_draft_each(
    gw: App, tg: FakeBotAPI, llm: ScriptedLLM
) -> None:
    text = long_reply()
    llm.push(streamed(text, chunks=40, delay=0.03))
    tg.push_message("the long one")
    await tg.wait_for(lambda: any("That is all." in t for t in tg.texts()))
    parts = [parse_html(t) for t in tg.texts()]
    assert len(parts) == 2 and all(len(p) <= 4096 for p in parts)
    assert len({c.params["draft_id"] for c in drafts(tg)}) == 2  # one draft per message
    joined = "\n".join(parts)
    assert all(f"print({n} < {n + 1} & True)" in joined for n in range(120))
