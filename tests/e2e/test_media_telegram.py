"""Media through Telegram end to end: the real python-telegram-bot in the real gateway, the
fake Bot API serving and accepting file bytes, the scripted LLM with fake speech and image
endpoints. Voice notes, image fallback, files out, generated images and speech, failures."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.app.app import App
from gateway.approvals.untrusted import wrap
from gateway.intake.access import NOT_ALLOWED
from gateway.media.turn import NO_VISION
from tests.e2e.test_telegram import telegram_gateway
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text, tool_results
from tests.fakes.telegram import FakeBotAPI
from tests.harness import configured_gateway, gateway_settings
from tests.media_samples import PDF, image_parts, jpeg, ogg_opus, png

pytestmark = pytest.mark.e2e

REFUSED = "Invalid content type. image_url is only supported by certain models."


def offered(request: dict[str, Any]) -> set[str]:
    """Tools the model may call: those described, and those named by load_tools (tools on
    demand: a group's line lists its tools in brackets)."""
    tools = [t["function"] for t in request.get("tools") or []]
    names = {t["name"] for t in tools}
    for tool in tools:
        if tool["name"] == "load_tools":
            for listed in re.findall(r"\(([^)]*)\)", tool["description"]):
                names.update(n.split(" +")[0].strip() for n in listed.split(","))
    return names


def photo_sizes(tg: FakeBotAPI, file_id: str, data: bytes) -> list[dict[str, Any]]:
    tg.add_file(file_id, data, path=f"photos/{file_id}.jpg")
    return [{"file_id": file_id, "file_unique_id": f"u{file_id}", "width": 640, "height": 480,
             "file_size": len(data)}]  # fmt: skip


def chat_folder(gw: App) -> Path:
    return gw.settings.workspace / "telegram-42"


async def test_voice_note_is_transcribed_echoed_and_answered(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    voice_bytes = ogg_opus()
    llm.media.transcripts.append("what's the weather in Lisbon")
    llm.push(Reply.text("Sunny in Lisbon."))
    stt = {"echo_transcript": True, "language": "en"}
    async with telegram_gateway(tmp_path, llm, tg, stt=stt):
        tg.push_message(voice=tg.voice("v-1", voice_bytes))
        await tg.wait_for(lambda: "Sunny in Lisbon." in tg.texts())
    [call] = llm.media.calls_to("/audio/transcriptions")
    # stt.base_url defaulted to llm.base_url; the bytes, a .ogg name and the model went along.
    assert call.file_data == voice_bytes and call.file_name == "voice.ogg"
    assert call.fields == {"model": "whisper-1", "response_format": "json", "language": "en"}
    assert tg.texts() == ['I heard: "what\'s the weather in Lisbon"', "Sunny in Lisbon."]
    content = last_user_text(llm.requests[0])
    assert "[voice message, transcribed]: what's the weather in Lisbon" in content
    assert "[attachment: voice voice_u-v-1.ogg (audio/ogg" in content


async def test_failed_transcription_is_one_clear_line_and_nothing_is_lost(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    llm.media.fail("/audio/transcriptions", 500, "whisper crashed")
    async with telegram_gateway(tmp_path, llm, tg) as gw:
        tg.push_message(voice=tg.voice("v-2", ogg_opus()))
        [line] = await tg.wait_sent(1)
        await asyncio.sleep(0.3)
        assert line.text == (
            "I could not transcribe your voice message: the speech-to-text service answered "
            "HTTP 500: whisper crashed."
        )
        assert llm.requests == [] and len(tg.sent()) == 1  # the model was not asked
        # The voice note stays in history: the next turn can still save it.
        llm.push(Reply.calls(("save_attachment", {"file_id": "v-2"})), Reply.text("Saved."))
        tg.push_message("keep that recording")
        await tg.wait_for(lambda: "Saved." in tg.texts())
        assert tool_results(llm.requests[1]) == ["saved attachments/voice_u-v-2.ogg (audio/ogg, "
                                                 f"{len(ogg_opus()):,} bytes)"]  # fmt: skip
        assert (chat_folder(gw) / "attachments/voice_u-v-2.ogg").read_bytes() == ogg_opus()


async def test_image_refused_by_the_server_falls_back_and_is_remembered(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    llm.push(Reply.error(400, REFUSED), Reply.text("From your words: a cat?"))
    async with telegram_gateway(tmp_path, llm, tg):
        tg.push_message(caption="is this a cat?", photo=photo_sizes(tg, "p-1", jpeg()))
        await tg.wait_for(lambda: "From your words: a cat?" in tg.texts())
        assert len(image_parts(llm.requests[0])) == 1
        retry = llm.requests[1]["messages"][-1]["content"]
        assert isinstance(retry, str) and "is this a cat?" in retry
        assert "cannot be shown to you" in retry and "person has been told" in retry
        assert tg.texts() == [NO_VISION, "From your words: a cat?"]
        # Remembered for the model: the next photo costs no refused request, and a photo
        # alone (nothing the model could use) is answered by the notice without the model.
        llm.push(Reply.text("Still no eyes."))
        tg.push_message(caption="and this one?", photo=photo_sizes(tg, "p-2", jpeg()))
        await tg.wait_for(lambda: "Still no eyes." in tg.texts())
        assert len(llm.requests) == 3 and image_parts(llm.requests[2]) == []
        tg.push_message(photo=photo_sizes(tg, "p-3", jpeg()))
        await tg.wait_for(lambda: tg.texts().count(NO_VISION) == 3)
        await asyncio.sleep(0.3)
        assert len(llm.requests) == 3
        assert [c.params["file_id"] for c in tg.calls_of("getFile")] == ["p-1"]


async def test_vision_model_answers_through_vision_analyze(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    llm_settings = {"vision": "off", "vision_model": "eyes-7b"}
    llm.push(
        Reply.calls(("vision_analyze", {"file_id": "p-9", "question": "What colour is it?"})),
        Reply.text("It is red."),  # the vision model's answer
        Reply.text("The square is red."),
    )
    telegram = {"token": tg.token, "api_url": tg.url, "poll_timeout": 1}
    settings = gateway_settings(tmp_path, llm.url, telegram=telegram, llm=llm_settings)
    async with configured_gateway(settings):
        tg.push_message(caption="what colour?", photo=photo_sizes(tg, "p-9", jpeg(800, 600)))
        await tg.wait_for(lambda: "The square is red." in tg.texts())
    first, vision, last = llm.requests
    assert "vision_analyze" in offered(first) and image_parts(first) == []
    assert "call vision_analyze with the file_id" in last_user_text(first)
    assert vision["model"] == "eyes-7b" and "tools" not in vision
    [image] = image_parts(vision)
    assert image.size == (800, 600)
    assert tool_results(last) == [wrap("vision_analyze", "It is red.")]  # outside content
    assert tg.texts() == ["The square is red."]  # no "cannot see" notice: the tool could look


async def test_earlier_image_is_sent_again_when_referred_to(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    llm.push(Reply.text("Got it."), Reply.text("It shows a red square."))
    async with telegram_gateway(tmp_path, llm, tg):
        tg.push_message(caption="here you go", photo=photo_sizes(tg, "p-4", jpeg()))
        await tg.wait_for(lambda: "Got it." in tg.texts())
        tg.push_message("what was in that picture again?")
        await tg.wait_for(lambda: "It shows a red square." in tg.texts())
    assert len(image_parts(llm.requests[1])) == 1
    assert "the earlier image file_id=p-4 is attached again" in last_user_text(llm.requests[1])


async def test_send_file_delivers_a_photo_and_a_document_with_the_exact_bytes(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    chart, report = png(800, 400), PDF + os.urandom(3000)
    llm.push(
        Reply.calls(
            ("send_file", {"path": "out/chart.png", "caption": "The **chart**"}),
            ("send_file", {"path": "out/report.pdf"}),
        ),
        Reply.text("Both sent."),
    )
    async with telegram_gateway(tmp_path, llm, tg) as gw:
        (chat_folder(gw) / "out").mkdir(parents=True)
        (chat_folder(gw) / "out/chart.png").write_bytes(chart)
        (chat_folder(gw) / "out/report.pdf").write_bytes(report)
        tg.push_message("send me the chart and the report")
        await tg.wait_for(lambda: "Both sent." in tg.texts())
    [photo] = tg.uploads_of("sendPhoto")
    [document] = tg.uploads_of("sendDocument")
    assert photo.data == chart and photo.caption == "The <b>chart</b>"
    assert photo.params["parse_mode"] == "HTML" and photo.filename == "chart.png"
    assert document.data == report and document.filename == "report.pdf"
    assert tool_results(llm.requests[1]) == [
        f"sent out/chart.png (image/png, {len(chart):,} bytes) as an image",
        f"sent out/report.pdf (application/pdf, {len(report):,} bytes) as a document",
    ]


async def test_image_generate_and_text_to_speech(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    # Off without an endpoint: neither tool is offered.
    async with telegram_gateway(tmp_path / "plain", llm, tg):
        tg.push_message("hi")
        await tg.wait_sent(1)
    assert not offered(llm.requests[0]) & {"image_generate", "text_to_speech"}
    assert "send_file" in offered(llm.requests[0])
    llm.push(
        Reply.calls(("image_generate", {"prompt": "A lighthouse at dusk", "caption": "Here"})),
        Reply.calls(("text_to_speech", {"text": "Good evening!"})),
        Reply.text("Done."),
    )
    media = {"base_url": llm.url, "api_key": "media-key-123"}
    async with telegram_gateway(tmp_path, llm, tg, images=media, tts=media) as gw:
        tg.push_message("draw me a lighthouse and say good evening")
        await tg.wait_for(lambda: "Done." in tg.texts())
        saved = sorted((chat_folder(gw) / "images").iterdir())
    assert {"image_generate", "text_to_speech"} <= offered(llm.requests[1])
    [generated] = llm.media.calls_to("/images/generations")
    assert generated.body == {"model": "gpt-image-1", "prompt": "A lighthouse at dusk", "n": 1,
                              "size": "1024x1024"}  # fmt: skip
    assert generated.authorization == "Bearer media-key-123"
    [photo] = tg.uploads_of("sendPhoto")
    assert photo.data == llm.media.image and photo.caption == "Here"
    assert len(saved) == 1 and saved[0].name.endswith("-a-lighthouse-at-dusk.png")
    assert saved[0].read_bytes() == llm.media.image
    [speech] = llm.media.calls_to("/audio/speech")
    assert speech.body == {"model": "tts-1", "input": "Good evening!", "voice": "alloy",
                           "response_format": "opus"}  # fmt: skip
    [voice] = tg.uploads_of("sendVoice")
    assert voice.data == llm.media.speech and voice.filename == "voice.ogg"


async def test_voice_is_answered_with_voice(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    llm.push(Reply.text("It is **nine** o'clock.\n\n```\ncode\n```"), Reply.text("Typed answer."))
    tts = {"base_url": llm.url, "reply_with_voice": "when_voice"}
    async with telegram_gateway(tmp_path, llm, tg, tts=tts):
        tg.push_message(voice=tg.voice("v-3", ogg_opus()))
        await tg.wait_for(lambda: len(tg.uploads_of("sendVoice")) == 1)
        tg.push_message("and typed?")
        await tg.wait_for(lambda: "Typed answer." in tg.texts())
        await asyncio.sleep(0.3)
    [speech] = llm.media.calls_to("/audio/speech")
    assert speech.body["input"] == "It is nine o'clock.\n\n(code omitted)"
    assert len(tg.uploads_of("sendVoice")) == 1  # a typed message gets no voice
    assert tg.texts()[0].startswith("It is <b>nine</b>")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("oversize", "I could not open your image big.png: the file has 30,000,000 bytes; the "
                     "limit is 20,000,000 (media.max_download_mb)."),
        ("wrong type", "I could not open your image scan.png: it is application/pdf, not a "
                       "JPEG, PNG, GIF or WebP image."),
        ("failed download", "I could not open your image gone.png: Telegram refused the file: "
                            "Invalid file_id."),
    ],
)  # fmt: skip
async def test_unusable_image_is_one_clear_line(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI, case: str, expected: str
) -> None:
    documents = {
        "oversize": {"file_id": "big", "file_name": "big.png", "file_size": 30_000_000},
        "wrong type": {"file_id": "scan", "file_name": "scan.png", "file_size": len(PDF)},
        "failed download": {"file_id": "gone", "file_name": "gone.png", "file_size": 10},
    }
    tg.add_file("scan", PDF)
    document = {**documents[case], "file_unique_id": "u1", "mime_type": "image/png"}
    async with telegram_gateway(tmp_path, llm, tg):
        tg.push_message(document=document)
        [line] = await tg.wait_sent(1)
        await asyncio.sleep(0.3)
    assert line.text == expected
    assert len(tg.sent()) == 1 and llm.requests == []
    if case == "oversize":  # refused from the declared size: nothing was fetched
        assert tg.calls_of("getFile") == []


async def test_nothing_is_fetched_for_people_not_allowed(
    tmp_path: Path, llm: ScriptedLLM, tg: FakeBotAPI
) -> None:
    access = {"allowed_users": ["@alice"]}
    async with telegram_gateway(tmp_path, llm, tg, telegram=access):
        tg.push_message(photo=photo_sizes(tg, "m-1", jpeg()), chat_id=99, user_id=99,
                        username="mallory")  # fmt: skip
        tg.push_message(voice=tg.voice("m-2", ogg_opus()), chat_id=99, user_id=99,
                        username="mallory")  # fmt: skip
        await tg.wait_sent(1, chat_id=99)
        await asyncio.sleep(0.5)
    assert tg.texts(99) == [NOT_ALLOWED]
    assert tg.calls_of("getFile") == [] and llm.media.calls == [] and llm.requests == []
