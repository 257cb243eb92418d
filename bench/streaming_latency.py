"""Streaming benchmark: how soon a person sees words, and how many updates a reply costs.

For a reply the model streams as 40 chunks 100 ms apart, on each platform (the real SDK
inside the real gateway, against the fake servers in tests/fakes/, production streaming
settings): the time from the person's message to the model's first token, to the first
visible text and to the final message, the first text's lag behind the first token, and
the platform calls that updated the reply. Prints a table; not a test.

    .venv/bin/python bench/streaming_latency.py [--replies 5] [--first-delay-ms 400]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from adapters.discord import DiscordAdapter  # noqa: E402
from adapters.slack.mrkdwn import to_mrkdwn  # noqa: E402
from gateway.app.app import App  # noqa: E402
from tests.fakes.discord import BOT_ID, FakeDiscord, discord_section  # noqa: E402
from tests.fakes.llm import Reply, ScriptedLLM  # noqa: E402
from tests.fakes.slack import (  # noqa: E402
    BOT_TOKEN,
    SECRET,
    FakeSlack,
    deliver,
    event_callback,
    events_url,
    mention,
)
from tests.fakes.slack import slack_gateway as configured_gateway  # noqa: E402
from tests.fakes.telegram import FakeBotAPI  # noqa: E402
from tests.harness import gateway_settings  # noqa: E402

CHUNKS, CHUNK_DELAY = 40, 0.1
GROUP = -1001234567890
STREAMING: dict[str, Any] = {}  # streaming settings for every gateway (from the command line)


def pieces(n: int) -> list[str]:
    """The reply as the model writes it: exactly CHUNKS pieces."""
    return [f"Reply {n}:", *(f" token{i:02d}" for i in range(CHUNKS - 1))]


def answer(n: int) -> str:
    return "".join(pieces(n))


@dataclass
class Sample:
    first_token: float  # seconds after the person's message
    first_visible: float
    final: float
    updates: int  # platform calls that changed the reply, the final one included


@dataclass
class Event:
    at: float
    kind: str  # "show" (the reply appears or changes) or "final"


class Platform:
    """One way a reply reaches a person: how to ask, and which calls showed the reply."""

    name: str

    async def ask(self, n: int) -> float: ...

    def events(self, n: int, since: float) -> list[Event]: ...

    def done(self, n: int) -> bool: ...


class TelegramChat(Platform):
    def __init__(self, tg: FakeBotAPI, *, group: bool) -> None:
        self.tg = tg
        self.group = group
        self.name = "Telegram group (edits)" if group else "Telegram DM (drafts)"

    async def ask(self, n: int) -> float:
        where = {"chat_id": GROUP, "chat_type": "supergroup"} if self.group else {}
        now = time.monotonic()
        self.tg.push_message(f"@gw_bot question {n}", **where)
        return now

    def events(self, n: int, since: float) -> list[Event]:
        calls = [c for c in self.tg.calls if c.at >= since and c.status == 200]
        found = []
        for call in calls:
            if call.method in ("sendMessageDraft", "editMessageText"):
                found.append(Event(call.at, "show"))
            elif call.method == "sendMessage":
                final = call.text == answer(n) and not self.group
                found.append(Event(call.at, "final" if final else "show"))
        if self.group and found:
            found[-1].kind = "final"  # the last edit made the message the answer
        return found

    def done(self, n: int) -> bool:
        if not self.group:
            return answer(n) in self.tg.texts()
        return any(m.get("text") == answer(n) for m in self.tg.messages.values())


class SlackThread(Platform):
    def __init__(self, slack: FakeSlack, app: App, *, refused: bool) -> None:
        self.slack = slack
        self.app = app
        slack.stream_methods = not refused
        self.name = "Slack thread (post + chat.update)" if refused else "Slack thread (stream)"

    async def ask(self, n: int) -> float:
        now = time.monotonic()
        event = mention(f"question {n}", ts=f"{1000 + n}.000100")
        await deliver(events_url(self.app), json.dumps(event_callback(event)))
        return now

    def events(self, n: int, since: float) -> list[Event]:
        shows = ("chat.postMessage", "chat.update", "chat.startStream", "chat.appendStream")
        found = []
        for call in self.slack.calls:
            if call.at >= since and call.result.get("ok"):
                if call.method in shows:
                    found.append(Event(call.at, "show"))
                elif call.method == "chat.stopStream":
                    found.append(Event(call.at, "final"))
        if found and found[-1].kind != "final":
            found[-1].kind = "final"
        return found

    def done(self, n: int) -> bool:
        texts = {m.text for m in self.slack.bot_messages()}
        return answer(n) in texts or to_mrkdwn(answer(n)) in texts


class DiscordChannel(Platform):
    name = "Discord channel (edits)"

    def __init__(self, fake: FakeDiscord) -> None:
        self.fake = fake

    async def ask(self, n: int) -> float:
        now = time.monotonic()
        await self.fake.send_message(f"<@{BOT_ID}> question {n}")
        return now

    def events(self, n: int, since: float) -> list[Event]:
        found = [
            Event(c.at, "show")
            for c in self.fake.calls
            if c.at >= since and c.method in ("POST", "PATCH") and "/messages" in c.path
        ]
        if found:
            found[-1].kind = "final"
        return found

    def done(self, n: int) -> bool:
        return any(m.get("content") == answer(n) for m in self.fake.messages.values())


async def measure(platform: Platform, llm: ScriptedLLM, replies: int) -> list[Sample]:
    samples = []
    for n in range(replies):
        llm.push(Reply(pieces=pieces(n), chunk_delay=CHUNK_DELAY))
        tokens = len(llm.first_tokens)
        asked = await platform.ask(n)
        async with asyncio.timeout(30):
            while not platform.done(n):  # noqa: ASYNC110 - fakes of three kinds; polling is simplest
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)  # the turn's last calls (typing, reactions) settle
        events = platform.events(n, asked)
        final = next(e for e in reversed(events) if e.kind == "final")
        samples.append(
            Sample(
                first_token=llm.first_tokens[tokens] - asked,
                first_visible=events[0].at - asked,
                final=final.at - asked,
                updates=len(events),
            )
        )
    return samples


async def telegram(llm: ScriptedLLM, tmp: Path, replies: int) -> list[tuple[str, list[Sample]]]:
    rows = []
    for group in (False, True):
        async with FakeBotAPI() as tg:
            section = {"token": tg.token, "api_url": tg.url, "poll_timeout": 1}
            settings = gateway_settings(
                tmp / f"tg{group}",
                llm.url,
                telegram=section,
                router={"typing_delay": 0.8},
                streaming=STREAMING,
            )
            async with configured_gateway(settings):
                platform = TelegramChat(tg, group=group)
                rows.append((platform.name, await measure(platform, llm, replies)))
    return rows


async def slack(llm: ScriptedLLM, tmp: Path, replies: int) -> list[tuple[str, list[Sample]]]:
    rows = []
    for refused in (False, True):
        async with FakeSlack() as fake:
            section = {"bot_token": BOT_TOKEN, "signing_secret": SECRET, "api_url": fake.api_url}
            settings = gateway_settings(
                tmp / f"slack{refused}",
                llm.url,
                slack=section,
                http={"enabled": True, "port": 0},
                scheduler={"enabled": False},
                streaming=STREAMING,
            )
            async with configured_gateway(settings) as app:
                platform = SlackThread(fake, app, refused=refused)
                rows.append((platform.name, await measure(platform, llm, replies)))
    return rows


async def discord(llm: ScriptedLLM, tmp: Path, replies: int) -> list[tuple[str, list[Sample]]]:
    async with FakeDiscord() as fake:
        settings = gateway_settings(
            tmp / "discord", llm.url, discord=discord_section(fake), streaming=STREAMING
        )
        async with configured_gateway(settings) as app:
            adapter = app.outbox.adapter("discord")
            assert isinstance(adapter, DiscordAdapter)
            await asyncio.wait_for(adapter.ready.wait(), 5)
            platform = DiscordChannel(fake)
            return [(platform.name, await measure(platform, llm, replies))]


def median(values: list[float]) -> float:
    return statistics.median(values)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", type=int, default=5, help="replies measured per platform")
    parser.add_argument(
        "--first-delay-ms", type=int, default=400, help="streaming.first_delay_ms (default 400)"
    )
    args = parser.parse_args()
    replies = args.replies
    STREAMING["first_delay_ms"] = args.first_delay_ms
    rows: list[tuple[str, list[Sample]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with ScriptedLLM(record=False) as llm:
            for runner in (telegram, slack, discord):
                rows += await runner(llm, Path(tmp), replies)
    print(
        f"reply: {CHUNKS} chunks {CHUNK_DELAY * 1000:.0f} ms apart; medians of {replies} "
        f"replies; first_delay_ms={args.first_delay_ms}; seconds after the person's message"
    )
    header = (
        f"{'platform':36} {'1st token':>9} {'1st text':>9} {'lag':>6} {'final':>7} {'updates':>8}"
    )
    print(header)
    for name, samples in rows:
        token = median([s.first_token for s in samples])
        visible = median([s.first_visible for s in samples])
        lag = median([s.first_visible - s.first_token for s in samples])
        final = median([s.final for s in samples])
        updates = median([float(s.updates) for s in samples])
        print(f"{name:36} {token:>9.2f} {visible:>9.2f} {lag:>6.2f} {final:>7.2f} {updates:>8.1f}")
    print("lag: first visible text after the model's first token (target: within 1.5 s)")


if __name__ == "__main__":
    asyncio.run(main())
