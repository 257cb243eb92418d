"""Media through Slack end to end: the real slack-bolt and slack_sdk in the real gateway over
Socket Mode, the fake Slack serving shared files (with the bot token only) and taking
files_upload_v2 uploads, the scripted LLM with fake speech endpoints."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack import SlackAdapter
from gateway.app.app import App
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fakes.slack import APP_TOKEN, BOT_TOKEN, FakeSlack, event_callback, mention, message
from tests.harness import configured_gateway, gateway_settings
from tests.media_samples import PDF, image_parts, jpeg, ogg_opus, png

pytestmark = pytest.mark.e2e

THREAD = "1000.000100"


def settings_for(tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack, **sections: Any) -> Any:
    return gateway_settings(
        tmp_path,
        llm.url,
        scheduler={"enabled": False},
        slack={"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "api_url": slack.api_url},
        **sections,
    )


@pytest.fixture
async def gw(tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack) -> AsyncIterator[App]:
    tts = {"base_url": llm.url}
    async with configured_gateway(settings_for(tmp_path, llm, slack, tts=tts)) as app:
        yield app


async def say(slack: FakeSlack, text: str, files: list[dict[str, Any]] | None = None) -> None:
    event = mention(text, ts=THREAD)
    if files:
        event["files"] = files
    await slack.push("events_api", event_callback(event))


def channel_folder(gw: App) -> Path:
    return gw.settings.workspace / "slack-C1"


async def test_shared_image_reaches_the_model_as_an_image_part(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    shared = slack.share("board.jpg", jpeg(3000, 1000), "image/jpeg")
    llm.push(Reply.text("A whiteboard."))
    await say(slack, "what is on the board?", [shared])
    await slack.wait_for_post("A whiteboard.")
    [image] = image_parts(llm.requests[0])
    assert image.size == (1568, 523)
    assert slack.downloads == [shared["id"]]  # files.info, then the private URL with the token
    assert slack.calls_to("files.info")[0]["file"] == shared["id"]
    assert f"[attachment: image board.jpg (image/jpeg, {shared['size']} bytes) file_id=" in (
        last_user_text(llm.requests[0])
    )


async def test_document_is_saved_with_save_attachment(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    body = PDF + b"quarterly numbers" * 100
    shared = slack.share("q3 report (final).pdf", body, "application/pdf")
    llm.push(Reply.calls(("save_attachment", {"file_id": shared["id"]})), Reply.text("Saved."))
    await say(slack, "keep this", [shared])
    await slack.wait_for_answer("Saved.")
    assert tool_results(llm.requests[1]) == [
        f"saved attachments/q3_report_final_.pdf (application/pdf, {len(body):,} bytes)"
    ]
    assert (channel_folder(gw) / "attachments/q3_report_final_.pdf").read_bytes() == body


async def test_send_file_uploads_a_photo_and_a_document_into_the_thread(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    chart, report = png(640, 480), PDF + b"x" * 5000
    (channel_folder(gw) / "out").mkdir(parents=True)
    (channel_folder(gw) / "out/chart.png").write_bytes(chart)
    (channel_folder(gw) / "out/report.pdf").write_bytes(report)
    llm.push(
        Reply.calls(("send_file", {"path": "out/chart.png", "caption": "The *chart*"})),
        Reply.calls(("send_file", {"path": "out/report.pdf"})),
        Reply.text("Both are in the thread."),
    )
    await say(slack, "send the chart and the report")
    await slack.wait_for_answer("Both are in the thread.")
    photo, document = slack.uploads()
    assert (photo.data, photo.name, photo.mimetype) == (chart, "chart.png", "image/png")
    assert (document.data, document.name) == (report, "report.pdf")
    assert photo.channel == document.channel == "C1"
    assert photo.thread_ts == document.thread_ts == THREAD
    assert photo.initial_comment == "The _chart_" and document.initial_comment is None


async def test_text_to_speech_uploads_an_audio_file(
    gw: App, slack: FakeSlack, llm: ScriptedLLM
) -> None:
    llm.push(Reply.calls(("text_to_speech", {"text": "Hello team"})), Reply.text("Said it."))
    await say(slack, "say hello")
    await slack.wait_for_answer("Said it.")
    [voice] = slack.uploads()
    assert voice.data == llm.media.speech and voice.name == "voice.ogg"
    assert voice.thread_ts == THREAD


async def test_audio_clip_is_transcribed(gw: App, slack: FakeSlack, llm: ScriptedLLM) -> None:
    clip = slack.share("audio_message.ogg", ogg_opus(), "audio/ogg", subtype="slack_audio")
    llm.media.transcripts.append("book a room for three")
    llm.push(Reply.text("Booked."))
    event = message("", channel="D1", ts="3000.000100", files=[clip], subtype="file_share")
    await slack.push("events_api", event_callback(event))
    await slack.wait_for_post("Booked.")
    [call] = llm.media.calls_to("/audio/transcriptions")
    assert call.file_data == ogg_opus()
    assert "[voice message, transcribed]: book a room for three" in last_user_text(llm.requests[0])


async def test_a_download_without_the_files_scope_is_one_clear_line(
    tmp_path: Path, llm: ScriptedLLM, slack: FakeSlack
) -> None:
    shared = slack.share("photo.jpg", jpeg(), "image/jpeg")
    async with configured_gateway(settings_for(tmp_path, llm, slack)) as gw:
        adapter = gw.outbox.adapter("slack")
        assert isinstance(adapter, SlackAdapter)
        slack.fail("files.info", "missing_scope")
        await say(slack, "", [shared])
        [post] = await slack.wait_for("chat.postMessage")
        await asyncio.sleep(0.3)
    assert post["text"] == (
        "I could not open your image photo.jpg: Slack refused the file: missing_scope (the app "
        "needs the files:read scope)."
    )
    assert llm.requests == [] and len(slack.calls_to("chat.postMessage")) == 1
