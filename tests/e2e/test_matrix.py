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
from adapters.matrix.plugin import PLUGIN as MATRIX
from gateway.app.app import App
from gateway.config import Settings
from gateway.sdk.messages import ChatKind, ChatRef
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fixtures_redis import RedisServer
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
    return gateway_settings(tmp_path, llm.url, matrix=matrix, scheduler={"enabled": False}, **extra)


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


async def test_direct_message_is_answered_typed_and_read(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, bot = people["alice"], people["bot"]
    settings = matrix_settings(
        tmp_path, llm, synapse, bot, matrix={"allowed_users": [alice.user_id]}
    )
    async with matrix_gateway(settings):
        room = await dm_with_bot(alice, bot)
        llm.push(Reply.text("echo: hello there", delay=1.5))  # time to see the bot typing
        asked = await alice.say(room, "hello there")
        [answer] = await alice.wait_message(bot.user_id, room, "echo: hello there")
        assert bot.user_id in alice.typing
        assert answer.relation == {}  # in a DM the answer quotes nothing
        assert "hello there" in last_user_text(llm.requests[0])
        await _eventually(lambda: (bot.user_id, asked) in alice.receipts, "read receipt")


async def test_a_message_that_cannot_be_decrypted_is_answered_with_a_notice(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, bot = people["alice"], people["bot"]
    async with matrix_gateway(matrix_settings(tmp_path, llm, synapse, bot)):
        room = await dm_with_bot(alice, bot)
        # A Megolm message of a session the bot's device never received.
        unreadable = {
            "algorithm": "m.megolm.v1.aes-sha2",
            "sender_key": "x" * 43,
            "device_id": alice.account.device_id,
            "session_id": "y" * 43,
            "ciphertext": "AwgAEnA" * 10,
        }
        await alice.send(room, unreadable, "m.room.encrypted")
        [notice] = await alice.wait_message(bot.user_id, room, "could not decrypt")
        assert notice.relation == {}  # a DM: no quote
        assert llm.requests == []
        await alice.say(room, "plain again")
        found = await alice.wait_message(bot.user_id, room, "echo: plain again", count=2)
        assert [m.text for m in found].count(notice.text) == 1  # said once


async def test_invite_from_someone_not_allowed_is_declined(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, carol, bot = people["alice"], people["carol"], people["bot"]
    settings = matrix_settings(
        tmp_path, llm, synapse, bot, matrix={"allowed_users": [alice.user_id]}
    )
    async with matrix_gateway(settings):
        room = await carol.create_room([bot.user_id], direct=True)
        await carol.wait_gone(room, bot.user_id)
        assert llm.requests == []


async def test_room_answers_mentions_replies_and_its_threads(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, carol, bot = people["alice"], people["carol"], people["bot"]
    async with matrix_gateway(matrix_settings(tmp_path, llm, synapse, bot)):
        room = await alice.create_room([bot.user_id, carol.user_id])
        await carol.join(room)
        await alice.wait_joined(room, bot.user_id)
        llm.push(*(Reply.text(f"answer {n}") for n in (1, 2, 3, 4)))
        await alice.say(room, "lunch at noon?")  # chatter: kept as context, not answered
        mention = {"m.mentions": {"user_ids": [bot.user_id]}}
        asked = await carol.say(room, "bot, what did alice ask?", **mention)
        [answer] = await alice.wait_message(bot.user_id, room, "answer 1")
        assert answer.relation == {"m.in_reply_to": {"event_id": asked}}
        assert len(llm.requests) == 1
        assert "lunch at noon?" in last_user_text(llm.requests[0])  # the chatter as context
        # A reply to the bot's message needs no mention.
        reply = {"m.relates_to": {"m.in_reply_to": {"event_id": answer.event_id}}}
        await alice.say(room, "> <bot> answer 1\n\nand tomorrow?", **reply)
        await alice.wait_message(bot.user_id, room, "answer 2", count=2)
        assert last_user_text(llm.requests[1]).endswith("and tomorrow?")
        # A thread is a session of its own; the bot answers in it, and then without mentions.
        thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": asked}}
        await carol.say(room, "in the thread, bot", **thread, **mention)
        found = await alice.wait_message(bot.user_id, room, "answer 3", count=3)
        assert found[2].relation["rel_type"] == "m.thread"
        assert found[2].relation["event_id"] == asked
        await carol.say(room, "and a follow-up", **thread)
        found = await alice.wait_message(bot.user_id, room, "answer 4", count=4)
        assert found[3].relation["event_id"] == asked
        thread_history = str(llm.requests[3]["messages"])
        assert "in the thread, bot" in thread_history
        assert "and tomorrow?" not in thread_history  # the room's session stays apart
        assert len(llm.requests) == 4


async def test_streamed_answer_is_edited_in_place(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, bot = people["alice"], people["bot"]
    streaming = {"interval_ms": 300, "first_delay_ms": 0}
    settings = matrix_settings(tmp_path, llm, synapse, bot, streaming=streaming)
    async with matrix_gateway(settings):
        room = await dm_with_bot(alice, bot)
        words = [f"word{i} " for i in range(12)]
        llm.push(Reply(pieces=words, chunk_delay=0.15))
        await alice.say(room, "tell me a long story")
        final = "".join(words).strip()
        [answer] = await alice.wait_message(bot.user_id, room, final)
        assert answer.text == final and answer.edits >= 1
        assert answer.edits <= 12 * 0.15 / 0.3 + 2  # at most one edit per interval


async def test_encrypted_room_answered_decrypted_and_again_after_a_restart(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, bot = people["alice"], people["bot"]
    settings = matrix_settings(tmp_path, llm, synapse, bot)
    async with matrix_gateway(settings):
        room = await dm_with_bot(alice, bot, encrypted=True)
        await alice.say(room, "the secret plan")
        [answer] = await alice.wait_message(bot.user_id, room, "echo: the secret plan")
        assert answer.encrypted  # sent as m.room.encrypted, decrypted by alice's device
        assert "the secret plan" in last_user_text(llm.requests[0])
    async with httpx.AsyncClient() as http:
        report = await check(MATRIX.section(settings), http)
    assert report.ok, report.detail
    assert f"device {bot.device_id}" in report.detail and "keys published" in report.detail
    assert "1 unverified" in report.detail  # alice's device, trusted on first use
    async with matrix_gateway(settings):
        await alice.say(room, "still there?")
        found = await alice.wait_message(bot.user_id, room, "echo: still there?", count=2)
        assert found[1].encrypted
        assert alice.undecrypted == []
    async with httpx.AsyncClient() as http:
        assert (await check(MATRIX.section(settings), http)).detail == report.detail


def chat_dir(settings: Settings, room: str, kind: ChatKind = ChatKind.GROUP) -> Path:
    """The workspace of a room, where its commands run and its files are."""
    chat = ChatRef(platform="matrix", chat_id=room, kind=kind)
    folder = Workspaces(settings.workspace, settings.tools.workspace_scope).folder(chat)
    return settings.workspace.joinpath(*folder)


async def test_approval_by_reaction_counts_only_the_requester(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, carol, bot = people["alice"], people["carol"], people["bot"]
    settings = matrix_settings(tmp_path, llm, synapse, bot)
    async with matrix_gateway(settings):
        room = await alice.create_room([bot.user_id, carol.user_id])
        await carol.join(room)
        await alice.wait_joined(room, bot.user_id)
        (chat_dir(settings, room) / "build").mkdir(parents=True)
        llm.push(Reply.call("shell", command="rm -rf build"), Reply.text("Cleaned."))
        await alice.say(room, "clean the build", **{"m.mentions": {"user_ids": [bot.user_id]}})
        [prompt] = await alice.wait_message(bot.user_id, room, "Approval needed")
        assert "React with ✅ Approve once · 🔁 Approve for session · ❌ Deny" in prompt.text
        await carol.react(room, prompt.event_id, "✅")
        refusal = await alice.wait_message(bot.user_id, room, "Only", count=2)
        assert "can decide on this" in refusal[1].text
        assert (chat_dir(settings, room) / "build").exists()
        await alice.react(room, prompt.event_id, "✅")
        await alice.wait_message(bot.user_id, room, "Cleaned.", count=3)
        assert not (chat_dir(settings, room) / "build").exists()
        assert "[exit code 0]" in tool_results(llm.requests[1])[0]
        assert prompt.text.startswith("Approved by") and "React with" not in prompt.text


async def test_files_in_and_out(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, bot = people["alice"], people["bot"]
    settings = matrix_settings(tmp_path, llm, synapse, bot)
    async with matrix_gateway(settings):
        room = await dm_with_bot(alice, bot, encrypted=True)
        photo = jpeg(800, 600)
        file = await alice.upload(photo, "image/jpeg", "board.jpg", encrypt=True)
        info = {"mimetype": "image/jpeg", "size": len(photo)}
        llm.push(Reply.text("A red board."))
        await alice.send(room, {"msgtype": "m.image", "body": "board.jpg", "info": info, **file})
        await alice.wait_message(bot.user_id, room, "A red board.")
        [image] = image_parts(llm.requests[0])
        assert image.size == (800, 600)
        # A voice message (MSC3245) is transcribed.
        voice = await alice.upload(ogg_opus(), "audio/ogg", "voice.ogg", encrypt=True)
        llm.media.transcripts.append("book a room for three")
        llm.push(Reply.text("Booked."))
        content = {"msgtype": "m.audio", "body": "voice.ogg", "org.matrix.msc3245.voice": {}}
        await alice.send(room, {**content, "info": {"mimetype": "audio/ogg"}, **voice})
        await alice.wait_message(bot.user_id, room, "Booked.", count=2)
        assert "book a room for three" in last_user_text(llm.requests[1])
        # A file out: uploaded encrypted to the media repository, decrypted by alice.
        workspace = chat_dir(settings, room, ChatKind.DIRECT)
        workspace.mkdir(parents=True, exist_ok=True)
        report = PDF + b"numbers" * 500
        (workspace / "report.pdf").write_bytes(report)
        llm.push(Reply.calls(("send_file", {"path": "report.pdf"})), Reply.text("Sent."))
        await alice.say(room, "send me the report")
        found = await alice.wait_message(bot.user_id, room, "Sent.", count=4)
        [sent] = [m for m in found if m.content.get("msgtype") == "m.file"]
        assert sent.content["body"] == "report.pdf" and "file" in sent.content
        assert await alice.download(sent.content) == report


async def test_two_replicas_one_syncs_and_the_other_takes_over(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any], redis_url: str
) -> None:
    alice, bot = people["alice"], people["bot"]
    shared = {"store_path": str(tmp_path / "shared-store"), "leader_ttl": 2}
    first = matrix_settings(tmp_path / "a", llm, synapse, bot, redis_url=redis_url, matrix=shared)
    prefix = first.redis.key_prefix
    second = matrix_settings(
        tmp_path / "b",
        llm,
        synapse,
        bot,
        redis_url=redis_url,
        matrix=shared,
        redis={"url": redis_url, "key_prefix": prefix},
    )
    async with contextlib.AsyncExitStack() as stack:
        one = await stack.enter_async_context(configured_gateway(first))
        two = await stack.enter_async_context(configured_gateway(second))
        await asyncio.wait_for(adapter(one).synced(), 30)
        assert adapter(one).syncing and not adapter(two).syncing
        assert "standby" in await adapter(two).state()
        room = await dm_with_bot(alice, bot)
        await alice.say(room, "first")
        await alice.wait_message(bot.user_id, room, "echo: first")
        await one.stop()  # the lease is given up; the standby syncs from the stored token
        await _eventually(lambda: adapter(two).syncing, "the standby takes over")
        await alice.say(room, "second")
        found = await alice.wait_message(bot.user_id, room, "echo: second", count=2)
        assert [m.text for m in found] == ["echo: first", "echo: second"]


async def test_a_password_login_is_kept_and_its_device_reused(
    tmp_path: Path, llm: ScriptedLLM, synapse: Synapse, people: dict[str, Any]
) -> None:
    alice, bot = people["alice"], people["bot"]
    login = {"access_token": None, "password": bot.password, "device_name": "chatgate test"}
    settings = matrix_settings(tmp_path, llm, synapse, bot, matrix=login)
    async with matrix_gateway(settings) as app:
        device = adapter(app).client.device_id
        assert device != bot.device_id  # a device of its own, not the registration's
        room = await dm_with_bot(alice, bot, encrypted=True)
        await alice.say(room, "hi")
        await alice.wait_message(bot.user_id, room, "echo: hi")
    saved = MATRIX.section(settings).store_path / "login.json"
    assert saved.stat().st_mode & 0o777 == 0o600
    assert bot.password not in saved.read_text()
    async with matrix_gateway(settings) as app:
        assert adapter(app).client.device_id == device


async def test_the_sync_token_moves_only_past_stored_events(
    tmp_path: Path,
    llm: ScriptedLLM,
    synapse: Synapse,
    people: dict[str, Any],
    redis_server: RedisServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    alice, bot = people["alice"], people["bot"]
    # A lease renewed every 10 s: the outage below is over before the sync would step down
    # for want of a store to renew it in.
    long_lease = {"leader_ttl": 30}
    settings = matrix_settings(
        tmp_path, llm, synapse, bot, redis_url=redis_server.url, matrix=long_lease
    )
    async with matrix_gateway(settings):
        room = await dm_with_bot(alice, bot)
        redis_server.stop()
        await alice.say(room, "while the store is down")
        # The sync fetches it, cannot store it, and fetches it again from the old token.
        await _eventually(lambda: "events not stored" in caplog.text, "fetched, not stored")
        redis_server.start()
        await alice.wait_message(bot.user_id, room, "echo: while the store is down", within=60)
        await asyncio.sleep(1)
        texts = [m.text for m in alice.messages(bot.user_id)]
        assert texts.count("echo: while the store is down") == 1, texts


async def _eventually(condition: Any, what: str, within: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within} s: {what}")
        await asyncio.sleep(0.1)
