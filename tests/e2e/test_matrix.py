"""Matrix end to end against a real Synapse: the gateway's adapter (matrix-nio with its crypto
store) on one side, people driven with matrix-nio on the other, the scripted LLM behind.

One Synapse serves the whole session (tests/fixtures_synapse.py); every test registers its
own bot and people, so nothing carries over between tests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.matrix.adapter import MatrixAdapter
from adapters.matrix.doctor import check
from gateway.app.app import App
from gateway.config import Settings
from gateway.sdk.messages import ChatKind, ChatRef
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fixtures_synapse import Account, Synapse
from tests.harness import configured_gateway, gateway_settings
from tests.matrix_kit import Person
from tests.media_samples import PDF, image_parts, jpeg, ogg_opus
from tools.files.workspaces import Workspaces

pytestmark = pytest.mark.e2e


@pytest.fixture
async def people(synapse: Synapse, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    """The bot's account and two people (alice, carol), logged in and syncing."""
    bot = await synapse.register("bot")
    started: list[Person] = []
    try:
        for name in ("alice", "carol"):
            account = await synapse.register(name)
            started.append(await Person.start(synapse.url, account, tmp_path / name))
        yield {"bot": bot, "alice": started[0], "carol": started[1]}
    finally:
        for person in started:
            await person.close()


def matrix_settings(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, bot: Account, **extra: Any
) -> Settings:
    matrix = {
        "homeserver": synapse.url,
        "user_id": bot.user_id,
        "access_token": bot.access_token,
        "store_path": str(tmp_path / "matrix-store"),
        "sync_timeout": 2,
        **extra.pop("matrix", {}),
    }
    return gateway_settings(
        tmp_path, llm.url, matrix=matrix, scheduler={"enabled": False}, **extra
    )


@contextlib.asynccontextmanager
async def matrix_gateway(settings: Settings) -> AsyncIterator[App]:
    async with configured_gateway(settings) as app:
        await asyncio.wait_for(adapter(app).synced(), 30)
        yield app


def adapter(app: App) -> MatrixAdapter:
    found = app.outbox.adapter("matrix")
    assert isinstance(found, MatrixAdapter)
    return found


async def dm_with_bot(person: Person, bot: Account, *, encrypted: bool = False) -> str:
    room = await person.create_room([bot.user_id], encrypted=encrypted, direct=True)
    await person.wait_joined(room, bot.user_id)
    return room


async def test_direct_message_is_answered_and_read(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, bot = people["alice"], people["bot"]
    settings = matrix_settings(tmp_path, llm, synapse, bot, matrix={"allowed_users": [alice.user_id]})
    async with matrix_gateway(settings):
        room = await dm_with_bot(alice, bot)
        asked = await alice.say(room, "hello there")
        [answer] = await alice.wait_message(bot.user_id, room, "echo: hello there")
        assert answer.relation == {}  # in a DM the answer quotes nothing
        assert "hello there" in last_user_text(llm.requests[0])
        await _eventually(lambda: (bot.user_id, asked) in alice.receipts, "read receipt")


async def _eventually(condition: Any, what: str, within: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.1)
