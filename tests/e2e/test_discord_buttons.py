"""Discord buttons and the gateway connection end to end: approval-style presses (and refusals),
presses after a reconnect and after a full restart, slow press handlers, one leader per bot
with takeover, and sharded processes that each connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from adapters.discord import DiscordAdapter, presses
from gateway.app.app import App
from gateway.sdk.callbacks import CallbackData
from gateway.sdk.messages import Button, ButtonPress, ChatKind, ChatRef, Outbound, PressReply
from gateway.sdk.tooling import ApprovalNeed, ToolContext, ToolSpec
from tests.fakes.discord import (
    ALICE,
    BOB,
    BOT_ID,
    GENERAL_ID,
    GUILD_ID,
    FakeDiscord,
    discord_section,
)
from tests.fakes.llm import Reply, ScriptedLLM, tool_results
from tests.harness import gateway_settings

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

GENERAL = rf"/channels/{GENERAL_ID}/messages"
CALLBACK = r"/interactions/\d+/tok-\d+/callback"
CHAT = ChatRef(
    platform="discord", chat_id=str(GENERAL_ID), kind=ChatKind.GROUP, space_id=str(GUILD_ID)
)
APPROVAL = Outbound(
    chat=CHAT,
    text="Run `rm -rf build/`?",
    buttons=(
        (
            Button(label="Approve", data="t:42:yes", style="primary"),
            Button(label="Deny", data="t:42:no", style="danger"),
        ),
    ),
)


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@dataclass(frozen=True)
class Choice(CallbackData, prefix="t"):
    """The test's own buttons: `t:<item>:<answer>`."""

    item: str
    answer: str


class Approvals:
    """A stand-in for the approvals service: only alice (the requester) may decide."""

    def __init__(self, delay: float = 0.0) -> None:
        self.presses: list[ButtonPress] = []
        self.delay = delay

    async def on(self, press: ButtonPress, data: Choice) -> PressReply:
        self.presses.append(press)
        await asyncio.sleep(self.delay)
        if press.user.user_id != str(ALICE):
            return PressReply(toast="Only alice or an admin can approve this.", alert=True)
        verdict = "approved" if press.data.endswith(":yes") else "denied"
        return PressReply(toast=verdict, edit_text=f"Run `rm -rf build/`? {verdict} by alice")


@contextlib.asynccontextmanager
async def discord_app(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeDiscord,
    redis_url: str,
    *,
    key_prefix: str = "",
    wait_ready: bool = True,
    **discord: Any,
) -> AsyncIterator[App]:
    settings = gateway_settings(
        tmp_path,
        llm.url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        discord=discord_section(fake, **discord),
    )
    app = App(settings)
    app.add_configured_adapters()
    await app.start()
    try:
        if wait_ready:
            await asyncio.wait_for(adapter_of(app).ready.wait(), 5)
        yield app
    finally:
        await app.stop()


def adapter_of(app: App) -> DiscordAdapter:
    adapter = app.outbox.adapter("discord")
    assert isinstance(adapter, DiscordAdapter)
    return adapter


async def send_approval(app: App, fake: FakeDiscord) -> dict[str, Any]:
    sent = await app.outbox.send(APPROVAL)
    message = fake.messages[sent.message_id]
    assert fake.custom_ids(message) == ["cg:t:42:yes", "cg:t:42:no"]
    return message


async def test_button_round_trip_and_refusal_of_another_user(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    approvals = Approvals()
    async with discord_app(tmp_path, llm, fake, redis_url) as app:
        app.extensions.add_buttons(Choice, approvals.on)
        message = await send_approval(app, fake)
        row = message["components"][0]["components"]
        assert [(b["label"], b["style"]) for b in row] == [("Approve", 1), ("Deny", 4)]

        await fake.press(message, "cg:t:42:yes", user_id=BOB)
        (refused,) = await fake.wait_for("POST", CALLBACK)
        await fake.press(message, "cg:t:42:yes", user_id=ALICE)
        _, approved = await fake.wait_for("POST", CALLBACK, count=2)
    assert refused.body["type"] == 4  # a new message, only for bob
    assert refused.body["data"]["flags"] == 64
    assert refused.body["data"]["content"] == "Only alice or an admin can approve this."
    assert approved.body["type"] == 7  # UPDATE_MESSAGE: the outcome replaces the text
    assert approved.body["data"]["content"] == "Run `rm -rf build/`? approved by alice"
    assert approved.body["data"]["components"] == []  # buttons removed
    bob, alice = approvals.presses
    assert (bob.user.user_id, alice.user.user_id) == (str(BOB), str(ALICE))
    assert alice.data == "t:42:yes" and alice.chat == CHAT
    assert alice.message is not None and alice.message.message_id == message["id"]
    assert alice.event_id.startswith("dc:i:")


class _Cmd(BaseModel):
    command: str


async def test_real_approval_prompt_refused_for_bob_approved_by_alice(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    ran: list[str] = []

    async def handler(args: _Cmd, ctx: ToolContext) -> str:
        ran.append(args.command)
        return f"ran {args.command}: ok"

    async def approval(args: _Cmd, ctx: ToolContext) -> ApprovalNeed:
        return ApprovalNeed(summary=args.command, reason="it deletes files", shape=args.command)

    async with discord_app(tmp_path, llm, fake, redis_url) as app:
        app.tools.register(ToolSpec("danger", "runs things", _Cmd, handler, "test", approval))
        llm.push(Reply.call("danger", command="rm -rf build"), Reply.text("Deleted build/."))
        await fake.send_message(f"<@{BOT_ID}> clean the build")
        (prompt_call,) = await fake.wait_for("POST", GENERAL)
        prompt = next(m for m in fake.messages.values() if m["components"])
        approve = next(i for i in fake.custom_ids(prompt) if i.endswith(":once"))
        await fake.press(prompt, approve, user_id=BOB)
        (refused,) = await fake.wait_for("POST", CALLBACK)
        assert not ran
        await fake.press(prompt, approve, user_id=ALICE)
        _, approved = await fake.wait_for("POST", CALLBACK, count=2)
        await fake.wait_for_post(GENERAL, "Deleted build/.")
    assert len(fake.custom_ids(prompt_call.body)) == 4  # once, session, deny, always
    assert refused.body["data"]["flags"] == 64
    assert "Only alice or an admin" in refused.body["data"]["content"]
    assert approved.body["type"] == 7 and approved.body["data"]["components"] == []
    assert ran == ["rm -rf build"]
    assert "ran rm -rf build: ok" in tool_results(llm.requests[1])[0]


async def test_buttons_work_after_a_reconnect_and_after_a_restart(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    async with discord_app(tmp_path, llm, fake, redis_url, key_prefix=prefix) as app:
        message = await send_approval(app, fake)
        older = await send_approval(app, fake)  # pressed only after the restart
        approvals = Approvals()
        app.extensions.add_buttons(Choice, approvals.on)
        await fake.drop()  # the websocket dies; discord.py resumes on resume_gateway_url
        await fake.wait_connected()
        assert len(fake.resumes) == 1
        await fake.press(message, "cg:t:42:no")
        (denied,) = await fake.wait_for("POST", CALLBACK)
        assert denied.body["data"]["content"].endswith("denied by alice")

    # A new process: nothing of the old view is in memory, the template still routes it.
    async with discord_app(tmp_path, llm, fake, redis_url, key_prefix=prefix) as app:
        approvals = Approvals()
        app.extensions.add_buttons(Choice, approvals.on)
        await fake.press(older, "cg:t:42:yes")
        _, approved = await fake.wait_for("POST", CALLBACK, count=2)
    assert approved.body["type"] == 7
    assert approved.body["data"]["content"].endswith("approved by alice")
    assert [p.data for p in approvals.presses] == ["t:42:yes"]
    assert len(fake.identifies) == 2


async def test_unknown_prefix_and_slow_handler(
    tmp_path: Path,
    llm: ScriptedLLM,
    fake: FakeDiscord,
    redis_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(presses, "ANSWER_WITHIN", 0.1)
    async with discord_app(tmp_path, llm, fake, redis_url) as app:
        message = await send_approval(app, fake)
        await fake.press(message, "cg:t:42:yes")  # nobody registered "t" (yet)
        (expired,) = await fake.wait_for("POST", CALLBACK)
        app.extensions.add_buttons(Choice, Approvals(delay=0.4).on)
        await fake.press(message, "cg:t:42:yes")
        _, deferred = await fake.wait_for("POST", CALLBACK, count=2)
        (edited,) = await fake.wait_for("PATCH", r"/webhooks/\d+/tok-\d+/messages/@original")
    assert expired.body["data"]["flags"] == 64
    assert "expired" in expired.body["data"]["content"]
    assert deferred.body == {"type": 6}  # DEFERRED_UPDATE_MESSAGE, then the edit
    assert edited.body["content"].endswith("approved by alice")
    assert edited.body["components"] == []


async def test_turn_reply_buttons_and_edit(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    async with discord_app(tmp_path, llm, fake, redis_url) as app:
        sent = await app.outbox.send(APPROVAL)
        await app.outbox.edit(sent, Outbound(chat=CHAT, text="(No answer in time.)"))
        (edit,) = await fake.wait_for("PATCH", rf"{GENERAL}/{sent.message_id}")
        await adapter_of(app).typing(CHAT)
        await fake.wait_for("POST", rf"/channels/{GENERAL_ID}/typing")
    assert edit.body["content"] == "(No answer in time.)"
    assert edit.body["components"] == []


async def test_one_leader_holds_the_gateway_and_another_takes_over(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    async with (
        discord_app(tmp_path / "a", llm, fake, redis_url, key_prefix=prefix) as first,
        discord_app(
            tmp_path / "b", llm, fake, redis_url, key_prefix=prefix, wait_ready=False
        ) as second,
    ):
        await asyncio.sleep(0.8)  # more than one renewal interval of leader_ttl=1.5
        assert adapter_of(first).receiving and not adapter_of(second).receiving
        assert await adapter_of(first).state() == "connected to the gateway"
        assert (await adapter_of(second).state()).startswith("standby: another replica")
        assert fake.connected == 1 and len(fake.identifies) == 1
        # The follower still sends (REST needs no gateway connection).
        await second.outbox.send(Outbound(chat=CHAT, text="from the follower"))
        await first.stop()  # releases the lease
        await asyncio.wait_for(adapter_of(second).ready.wait(), 5)
        assert adapter_of(second).receiving
        assert await adapter_of(second).state() == "connected to the gateway"
        llm.push(Reply.text("answered by the new leader"))
        await fake.send_message(f"<@{BOT_ID}> still there?")
        replies = await fake.wait_for("POST", GENERAL, count=2)
    assert [c.body["content"] for c in replies] == [
        "from the follower",
        "answered by the new leader",
    ]
    assert len(fake.identifies) == 2


async def test_sharded_processes_each_connect_with_their_shards(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    shard: dict[str, Any] = {"shard_count": 2, "key_prefix": prefix}
    async with (
        discord_app(tmp_path / "a", llm, fake, redis_url, shard_ids=[0], **shard),
        discord_app(tmp_path / "b", llm, fake, redis_url, shard_ids=[1], **shard),
    ):
        assert fake.connected == 2
        assert sorted(i["shard"] for i in fake.identifies) == [[0, 2], [1, 2]]
        llm.push(Reply.text("one answer"))
        await fake.send_message(f"<@{BOT_ID}> hello shards")  # both receive it here
        await fake.wait_for("POST", GENERAL)
        await asyncio.sleep(0.3)
    assert len(fake.calls_to("POST", GENERAL)) == 1  # the duplicate was dropped by event id
