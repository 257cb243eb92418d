"""The OpenAI-compatible media clients against the fake endpoints over real HTTP: requests,
answers, and one clear sentence (without the key) for every failure."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from gateway.config import ImagesSettings, LLMSettings, STTSettings, TTSSettings
from gateway.media.services import (
    Endpoint,
    ImageGenerator,
    MediaClient,
    MediaServiceError,
    Speaker,
    Transcriber,
    endpoint,
)
from tests.fakes.media import FakeMediaAPI
from tests.media_samples import PDF, ogg_opus

KEY = "sk-media-SECRET-9c2d"


@pytest.fixture
async def api() -> AsyncIterator[FakeMediaAPI]:
    async with FakeMediaAPI() as server:
        yield server


def client(url: str, key: str = KEY, what: str = "speech-to-text") -> MediaClient:
    return MediaClient(Endpoint(url, key, 5.0, what, "stt"))


def test_keys_are_borrowed_only_on_the_llms_own_server() -> None:
    llm = LLMSettings(base_url="https://llm.example/v1", api_key=SecretStr("llm-key-123"))
    same = endpoint(STTSettings(), llm, what="x", setting="stt", default_to_llm=True)
    assert same is not None and (same.base_url, same.api_key) == (llm.base_url, "llm-key-123")
    other = STTSettings(base_url="https://whisper.lan/v1")
    elsewhere = endpoint(other, llm, what="x", setting="stt", default_to_llm=True)
    assert elsewhere is not None and elsewhere.api_key == ""
    own = TTSSettings(base_url="https://tts.lan/v1", api_key=SecretStr("tts-key"))
    found = endpoint(own, llm, what="x", setting="tts", default_to_llm=False)
    assert found is not None and found.api_key == "tts-key"
    assert endpoint(ImagesSettings(), llm, what="x", setting="images", default_to_llm=False) is None


async def test_transcription(api: FakeMediaAPI) -> None:
    api.media.transcripts.append(" bonjour ")
    transcriber = Transcriber(client(api.url), model="whisper-large", language="fr")
    try:
        assert await transcriber.transcribe(ogg_opus(), "audio/ogg") == "bonjour"
    finally:
        await transcriber.aclose()
    [call] = api.media.calls
    assert call.authorization == f"Bearer {KEY}" and call.file_type == "audio/ogg"
    assert call.fields["language"] == "fr" and call.fields["model"] == "whisper-large"


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (401, "bad key " + KEY, "refused the credentials (HTTP 401); check stt.api_key"),
        (404, "Not Found", "has no /audio/transcriptions endpoint at the configured address; "
                           "check stt.base_url"),
        (500, "decoder failed for key " + KEY, "answered HTTP 500: decoder failed for key ***"),
    ],
)  # fmt: skip
async def test_failures_are_one_sentence_without_the_key(
    api: FakeMediaAPI, status: int, message: str, expected: str
) -> None:
    api.media.fail("/audio/transcriptions", status, message)
    transcriber = Transcriber(client(api.url), model="whisper-1")
    try:
        with pytest.raises(MediaServiceError) as failed:
            await transcriber.transcribe(ogg_opus(), "audio/ogg")
    finally:
        await transcriber.aclose()
    assert str(failed.value) == f"the speech-to-text service {expected}"
    assert KEY not in str(failed.value)


async def test_no_server_is_one_sentence() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transcriber = Transcriber(client(f"http://127.0.0.1:{port}/v1"), model="whisper-1")
    try:
        with pytest.raises(MediaServiceError, match="service is not reachable \\(ConnectError\\)"):
            await transcriber.transcribe(ogg_opus(), "audio/ogg")
    finally:
        await transcriber.aclose()


async def test_speech_must_be_audio(api: FakeMediaAPI) -> None:
    speaker = Speaker(client(api.url, what="text-to-speech"), model="tts-1", voice="nova")
    try:
        speech = await speaker.speak("hi", voice="echo")
        assert (speech.data, speech.mime) == (api.media.speech, "audio/ogg")
        api.media.speech = PDF
        with pytest.raises(MediaServiceError, match="sent application/pdf instead of audio"):
            await speaker.speak("hi")
    finally:
        await speaker.aclose()
    assert api.media.calls[0].body["voice"] == "echo" and api.media.calls[1].body["voice"] == "nova"


async def test_generated_image_as_base64_or_as_a_link(api: FakeMediaAPI) -> None:
    images = ImageGenerator(client(api.url, what="image"), model="dall-e-3", size="512x512")
    try:
        assert await images.generate("a cat") == (api.media.image, "image/png")
        api.media.image_as_url = True
        assert await images.generate("a dog", size="256x256") == (api.media.image, "image/png")
        api.media.image = PDF
        with pytest.raises(MediaServiceError, match="instead of an image"):
            await images.generate("a pdf")
    finally:
        await images.aclose()
    first, second, _ = api.media.calls
    assert first.body["response_format"] == "b64_json" and first.body["size"] == "512x512"
    assert second.body["size"] == "256x256"
