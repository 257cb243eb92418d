"""Mattermost across restarts: a post is written down on receipt, so a replica killed after
receiving it (before storing it) loses nothing: the replica that takes the WebSocket over
answers it. And a button sent before a restart still verifies and decides after it."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway.sdk.callbacks import CallbackData
from gateway.sdk.messages import Button, ButtonPress, ChatKind, ChatRef, Outbound, PressReply
from tests.e2e.test_mattermost import mattermost_app
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text
from tests.fakes.mattermost import ALICE, DM, TEAM_NAME, TOKEN, TOWN, FakeMattermost
from tests.replicas import base_env, free_port, model_env, start_replica

pytestmark = [pytest.mark.e2e, pytest.mark.redis]


async def test_a_post_received_by_a_replica_that_dies_is_answered_by_the_next(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    async with FakeMattermost() as fake:
        env = base_env(
            **model_env(llm),
            CHATGATE_MATTERMOST__URL=fake.url,
            CHATGATE_MATTERMOST__TOKEN=TOKEN,
            CHATGATE_MATTERMOST__TEAM=TEAM_NAME,
            CHATGATE_MATTERMOST__LEADER_TTL="1.5",
            CHATGATE_REDIS__URL=redis_url,
            CHATGATE_REDIS__KEY_PREFIX=f"mm{uuid.uuid4().hex[:8]}",
        )
        doomed = await start_replica("doomed", tmp_path, env, crash_at="mattermost_received")
        await fake.wait_connected(1, within=60)  # the first replica holds the socket
        survivor = await start_replica("survivor", tmp_path, env)
        try:
            llm.push(Reply.text("answered by the survivor"))
            asked = await fake.post_as(ALICE, TOWN, "@chatgate are you there?")
            # Killed right after writing it down.
            assert await asyncio.wait_for(doomed.proc.wait(), 15) == -9
            await fake.wait_for_post(
                TOWN, "answered by the survivor", root_id=asked["id"], within=60
            )
            assert len(llm.requests) == 1
            assert "mattermost post received by a replica that stopped" in (
                survivor.log.read_text()
            )
        finally:
            await survivor.stop()
            await doomed.stop()


@dataclass(frozen=True)
class Choice(CallbackData, prefix="t"):
    """The test's own buttons: `t:<item>:<answer>`."""

    item: str
    answer: str


async def test_a_button_sent_before_a_restart_decides_after_it(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    presses: list[ButtonPress] = []

    async def on_press(press: ButtonPress, data: Choice) -> PressReply:
        presses.append(press)
        return PressReply(toast="ok", edit_text=f"Chose {data.answer}.")

    prefix = f"t{uuid.uuid4().hex[:8]}"
    chat = ChatRef(platform="mattermost", chat_id=TOWN, kind=ChatKind.CHANNEL)
    prompt = Outbound(
        chat=chat,
        text="Pick one",
        buttons=((Button(label="Yes", data="t:7:yes"), Button(label="No", data="t:7:no")),),
    )
    port = free_port()  # the public URL the buttons point at stays the same
    async with FakeMattermost() as fake:
        async with mattermost_app(
            tmp_path, llm, fake, redis_url, key_prefix=prefix, port=port
        ) as app:
            sent = await app.outbox.send(prompt)
        post = fake.posts[sent.message_id]
        assert [a["name"] for a in fake.actions(post)] == ["Yes", "No"]
        async with mattermost_app(
            tmp_path, llm, fake, redis_url, key_prefix=prefix, port=port
        ) as app:
            app.extensions.add_buttons(Choice, on_press)
            no = fake.actions(post)[1]["id"]
            status, answer = await fake.press(post["id"], no, user_id=ALICE)
    assert status == 200 and answer == {"update": {"message": "Chose no.", "props": {}}}
    assert post["message"] == "Chose no." and fake.actions(post) == []
    [press] = presses
    assert press.chat.chat_id == TOWN and press.user.user_id == ALICE
    assert press.message is not None and press.message.message_id == post["id"]


async def test_a_post_sent_while_the_gateway_restarts_is_answered_after_it(
    tmp_path: Path, llm: ScriptedLLM, redis_url: str
) -> None:
    """The socket's position is kept in the store: the next process resumes the connection
    and the server sends what it missed meanwhile."""
    prefix = f"t{uuid.uuid4().hex[:8]}"
    async with FakeMattermost() as fake:
        llm.push(Reply.text("before"), Reply.text("after the restart"))
        async with mattermost_app(tmp_path, llm, fake, redis_url, key_prefix=prefix):
            await fake.post_as(ALICE, DM, "one")
            await fake.wait_for_post(DM, "before")
        await fake.post_as(ALICE, DM, "sent while the gateway was down")
        async with mattermost_app(tmp_path, llm, fake, redis_url, key_prefix=prefix):
            await fake.wait_for_post(DM, "after the restart")
    assert fake.resumed == 1
    assert [last_user_text(r) for r in llm.requests] == ["one", "sent while the gateway was down"]
