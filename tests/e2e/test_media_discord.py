"""Media through Discord end to end: the real discord.py in the real gateway, the fake Discord
serving attachments from its CDN (links expire and are refreshed) and taking multipart
uploads in channels and interaction followups; the scripted LLM with fake speech endpoints."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.discord import DiscordAdapter
from gateway.app.app import App
from tests.e2e.test_discord import FOLLOWUP, GENERAL, MENTION
from tests.fakes.discord import GENERAL_ID, FakeDiscord, discord_section
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.harness import configured_gateway, gateway_settings
from tests.media_samples import PDF, image_parts, jpeg, ogg_opus, png

pytestmark = [pytest.mark.e2e, pytest.mark.redis]


@pytest.fixture
async def fake() -> AsyncIterator[FakeDiscord]:
    async with FakeDiscord() as server:
        yield server


@contextlib.asynccontextmanager
async def discord_gateway(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str, **sections: Any
) -> AsyncIterator[App]:
    settings = gateway_settings(
        tmp_path, llm.url, redis_url=redis_url, discord=discord_section(fake), **sections
    )
    async with configured_gateway(settings) as app:
        adapter = app.outbox.adapter("discord")
        assert isinstance(adapter, DiscordAdapter)
        await asyncio.wait_for(adapter.ready.wait(), 5)
        yield app


def channel_folder(gw: App) -> Path:
    return gw.settings.workspace / f"discord-{GENERAL_ID}"


async def test_attached_image_reaches_the_model_and_an_expired_link_is_refreshed(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    photo = fake.attachment("screen.png", png(1000, 2000), "image/png")
    fake.expired.add(photo["url"].removeprefix(f"http://127.0.0.1:{fake.port}"))
    llm.push(Reply.text("A tall screenshot."))
    async with discord_gateway(tmp_path, llm, fake, redis_url):
        await fake.send_message(f"{MENTION} what is this?", attachments=[photo])
        await fake.wait_for_post(GENERAL, "A tall screenshot.")
    [image] = image_parts(llm.requests[0])
    assert image.size == (784, 1568) and image.format == "PNG"
    [refresh] = fake.calls_to("POST", "/attachments/refresh-urls")
    assert refresh.body == {"attachment_urls": [photo["url"]]} and refresh.authorized
    assert fake.cdn_gets == [photo["id"]]  # the refreshed link served it


async def test_document_is_saved_and_files_go_out_as_attachments(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    body = PDF + b"minutes" * 300
    document = fake.attachment("minutes.pdf", body, "application/pdf")
    chart = png(300, 200)
    llm.push(
        Reply.calls(("save_attachment", {"file_id": document["url"]})),
        Reply.calls(
            ("send_file", {"path": "chart.png", "caption": "Chart attached"}),
            ("send_file", {"path": "attachments/minutes.pdf"}),
        ),
        Reply.text("Saved and sent back."),
    )
    async with discord_gateway(tmp_path, llm, fake, redis_url) as gw:
        channel_folder(gw).mkdir(parents=True)
        (channel_folder(gw) / "chart.png").write_bytes(chart)
        asked = await fake.send_message(f"{MENTION} file this", attachments=[document])
        await fake.wait_for_post(GENERAL, "Saved and sent back.")
    assert tool_results(llm.requests[1]) == [
        f"saved attachments/minutes.pdf (application/pdf, {len(body):,} bytes)"
    ]
    assert (channel_folder(gw) / "attachments/minutes.pdf").read_bytes() == body
    uploads = [c for c in fake.calls_to("POST", GENERAL) if c.files]
    assert len(uploads) == 2
    by_name = {c.files[0].filename: c for c in uploads}
    assert by_name["chart.png"].files[0].data == chart
    assert by_name["chart.png"].body["content"] == "Chart attached"
    assert by_name["minutes.pdf"].files[0].data == body
    for call in uploads:  # each replies to the message that asked
        assert str(call.body["message_reference"]["message_id"]) == asked["id"]


async def test_slash_command_gets_its_file_as_a_followup(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    llm.push(
        Reply.calls(("text_to_speech", {"text": "Stand-up starts now"})),
        Reply.text("Announced."),
    )
    async with discord_gateway(tmp_path, llm, fake, redis_url, tts={"base_url": llm.url}):
        await fake.slash("ask", {"prompt": "announce the stand-up"})
        await fake.wait_for_post(FOLLOWUP, "Announced.")
    [upload] = [c for c in fake.calls_to("POST", FOLLOWUP) if c.files]
    assert upload.files[0].data == llm.media.speech and upload.files[0].filename == "voice.ogg"
    assert not [c for c in fake.calls_to("POST", GENERAL) if c.files]


async def test_voice_message_is_transcribed(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    voice = fake.attachment("voice-message.ogg", ogg_opus(), "audio/ogg", voice=True)
    llm.media.transcripts.append("remind me at noon")
    llm.push(Reply.text("I will."))
    async with discord_gateway(tmp_path, llm, fake, redis_url):
        await fake.send_message(f"{MENTION}", attachments=[voice])
        await fake.wait_for_post(GENERAL, "I will.")
    content = last_user_text(llm.requests[0])
    assert "[attachment: voice voice-message.ogg (audio/ogg" in content
    assert "[voice message, transcribed]: remind me at noon" in content


async def test_an_image_link_that_is_not_discords_is_never_fetched(
    tmp_path: Path, llm: ScriptedLLM, fake: FakeDiscord, redis_url: str
) -> None:
    outside = fake.attachment("x.jpg", jpeg(), "image/jpeg")
    outside["url"] = "https://example.invalid/x.jpg"
    async with discord_gateway(tmp_path, llm, fake, redis_url):
        await fake.send_message(f"{MENTION}", attachments=[outside])
        [posted] = await fake.wait_for("POST", GENERAL)
        await asyncio.sleep(0.3)
    assert posted.body["content"] == (
        "I could not open your image x.jpg: that is not a Discord attachment link."
    )
    assert fake.cdn_gets == [] and llm.requests == []
