"""Streamed replies on Discord end to end: discord.py against the fake Discord, a scripted model
that streams in timed chunks. Post then edit in channels, followup edits for slash commands, a
reply crossing Discord's 2000 characters, a 429 in the middle, a message deleted meanwhile."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from gateway.app.app import App
from tests.e2e.test_discord import discord_app
from tests.fakes.discord import APP_ID, BOT_ID, GENERAL_ID, FakeDiscord
from tests.fakes.llm import Reply, ScriptedLLM

pytestmark = [pytest.mark.e2e]

MENTION = f"<@{BOT_ID}>"
POSTS = rf"/channels/{GENERAL_ID}/messages"
EDITS = rf"/channels/{GENERAL_ID}/messages/\d+"
FAST = {"interval_ms": 150, "first_delay_ms": 0}
ANSWER = " ".join(f"word{n}" for n in range(40)) + "."


def streamed(text: str = ANSWER, chunks: int = 15, delay: float = 0.06) -> Reply:
    return Reply.streamed(text, chunks=chunks, delay=delay)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord) -> AsyncIterator[App]:
    async with discord_app(tmp_path, llm, fake, streaming=FAST) as app:
        yield app


def showing(fake: FakeDiscord, text: str) -> Callable[[], bool]:
    """True once one of the bot's messages shows text containing `text`."""
    return lambda: any(text in (fake.shown(i) or "") for i in bot_posts(fake))


def bot_posts(fake: FakeDiscord) -> list[str]:
    """Ids of the bot's messages, oldest first."""
    return [m["id"] for m in fake.messages.values() if m["author"]["id"] == str(BOT_ID)]


async def test_channel_reply_posts_then_edits(gw: App, fake: FakeDiscord, llm: ScriptedLLM) -> None:
    llm.push(streamed())
    asked = await fake.send_message(f"{MENTION} tell me")
    await fake.wait_until(lambda: ANSWER in map(fake.shown, bot_posts(fake)), within=8)
    [post] = fake.calls_to("POST", POSTS)
    assert str(post.body["message_reference"]["message_id"]) == asked["id"]
    assert ANSWER.startswith(post.body["content"]) and post.body["content"] != ANSWER
    edits = fake.calls_to("PATCH", EDITS)
    assert len(edits) >= 2
    assert edits[-1].body["content"] == ANSWER


async def test_slash_command_streams_through_followup_edits(
    gw: App, fake: FakeDiscord, llm: ScriptedLLM
) -> None:
    llm.push(streamed())
    await fake.slash("ask", {"prompt": "tell me"})
    hook = rf"/webhooks/{APP_ID}/tok-\d+"
    await fake.wait_until(lambda: ANSWER in map(fake.shown, bot_posts(fake)), within=8)
    [first] = fake.calls_to("POST", hook)
    assert ANSWER.startswith(first.body["content"])
    edits = fake.calls_to("PATCH", hook + r"/messages/\d+")
    assert edits and edits[-1].body["content"] == ANSWER
    assert fake.calls_to("POST", POSTS) == []  # all of it through the interaction


async def test_a_reply_passing_2000_goes_on_in_a_new_message(
    gw: App, fake: FakeDiscord, llm: ScriptedLLM
) -> None:
    code = "\n".join(f"x{n} = {n} * 2" for n in range(150))
    text = "The script:\n\n```python\n" + code + "\n```\n\nRun it with python."
    llm.push(streamed(text, chunks=30, delay=0.03))
    await fake.send_message(f"{MENTION} write it")
    await fake.wait_until(showing(fake, "Run it with python."), within=8)
    parts = [fake.shown(i) or "" for i in bot_posts(fake)]
    assert len(parts) == 2 and all(len(p) <= 2000 for p in parts)
    assert parts[0].endswith("```") and parts[1].startswith("```python\n")
    for n in range(150):
        assert f"x{n} = {n} * 2" in "\n".join(parts)


async def test_429_on_an_edit_slows_the_stream_and_keeps_the_answer(
    gw: App, fake: FakeDiscord, llm: ScriptedLLM
) -> None:
    fake.rate_limit("PATCH", EDITS, 1.0)
    llm.push(streamed())
    await fake.send_message(f"{MENTION} go")
    await fake.wait_until(lambda: ANSWER in map(fake.shown, bot_posts(fake)), within=8)
    assert len(fake.calls_to("POST", POSTS)) == 1
    # discord.py waited the 429 out itself; the metric still heard it.
    assert gw.metrics.total("platform_rate_limited_total", platform="discord") >= 1


async def test_deleted_message_is_posted_again(
    gw: App, fake: FakeDiscord, llm: ScriptedLLM
) -> None:
    llm.push(streamed(chunks=20, delay=0.08))
    await fake.send_message(f"{MENTION} go")
    [first] = await fake.wait_for("POST", POSTS)
    fake.deleted.add(bot_posts(fake)[0])  # a person deleted it while it was being written
    await fake.wait_until(lambda: ANSWER in map(fake.shown, bot_posts(fake)), within=8)
    assert len(fake.calls_to("POST", POSTS)) == 2
    assert first.body["content"] != ANSWER
