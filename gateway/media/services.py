"""Clients for the OpenAI-compatible media endpoints: speech to text (`/audio/transcriptions`),
text to speech (`/audio/speech`) and image generation (`/images/generations`).

They work with OpenAI, Groq, a local faster-whisper or whisper.cpp server, or anything else
that speaks these endpoints. Every failure is a `MediaServiceError` whose text is one clear
sentence without secrets, for the person, the model and the log.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.config import LLMSettings, MediaEndpoint
from gateway.llm.errors import Redactor
from gateway.llm.responses import server_message
from gateway.media.sniff import WEB_IMAGES, extension_for, sniff

_MAX_RESULT_BYTES = 50_000_000  # generated audio or images read at most


class MediaServiceError(Exception):
    """A media service failed; the message says what failed and what to check."""


@dataclass(frozen=True)
class Endpoint:
    """Where a service is: base URL, bearer key (may be empty), and a name for messages."""

    base_url: str
    api_key: str
    timeout: float
    what: str  # "speech-to-text", for messages
    setting: str  # "stt", the settings section to name in hints


def endpoint(
    section: MediaEndpoint, llm: LLMSettings, *, what: str, setting: str, default_to_llm: bool
) -> Endpoint | None:
    """The endpoint a section configures; None when it has no base URL (and may not default
    to the LLM's). An empty key borrows llm.api_key only on the LLM's own server."""
    base = section.base_url or (llm.base_url if default_to_llm else "")
    if not base:
        return None
    key = section.api_key.get_secret_value()
    if not key and _origin(base) == _origin(llm.base_url):
        key = llm.api_key.get_secret_value()
    return Endpoint(base.rstrip("/"), key, section.timeout, what, setting)


def _origin(url: str) -> tuple[str, str, int | None]:
    parsed = httpx.URL(url)
    return parsed.scheme, parsed.host, parsed.port


class MediaClient:
    """One endpoint's HTTP client; errors become MediaServiceError."""

    def __init__(
        self, where: Endpoint, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.where = where
        headers = {"User-Agent": "chatgate"}
        if where.api_key:
            headers["Authorization"] = f"Bearer {where.api_key}"
        self._redact = Redactor([where.api_key])
        self._headers = headers
        self._timeout = httpx.Timeout(where.timeout, connect=10.0)
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        # Made on first use: the client's TLS context (the CA bundle parsed) and httpx's
        # transport modules cost ~2 MB in a gateway that never hears a voice note.
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.where.base_url + "/",
                headers=self._headers,
                timeout=self._timeout,
                transport=self._transport,
                follow_redirects=False,
            )
        return self._client

    async def post(self, path: str, **kwargs: Any) -> httpx.Response:
        url = path.lstrip("/")
        try:
            response = await self._http().post(url, **kwargs)
        except httpx.TimeoutException:
            raise self.error(f"did not answer within {self.where.timeout:g} s") from None
        except httpx.RequestError as exc:
            raise self.error(f"is not reachable ({type(exc).__name__})") from None
        if response.is_success:
            if len(response.content) > _MAX_RESULT_BYTES:
                raise self.error("sent a result larger than 50 MB")
            return response
        raise self._status_error(response, path)

    async def get_bytes(self, url: str) -> bytes:
        """A result the service links to (an image URL); no credentials are sent along."""
        try:
            async with (
                httpx.AsyncClient(timeout=self._timeout) as plain,
                plain.stream("GET", url) as response,
            ):
                if not response.is_success:
                    raise self.error(f"linked a result that answered HTTP {response.status_code}")
                chunks, got = [], 0
                async for chunk in response.aiter_bytes():
                    got += len(chunk)
                    if got > _MAX_RESULT_BYTES:
                        raise self.error("linked a result larger than 50 MB")
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.RequestError as exc:
            raise self.error(
                f"linked a result that could not be fetched ({type(exc).__name__})"
            ) from None

    def error(self, what_happened: str) -> MediaServiceError:
        return MediaServiceError(f"the {self.where.what} service {what_happened}")

    def _status_error(self, response: httpx.Response, path: str) -> MediaServiceError:
        status = response.status_code
        setting = self.where.setting
        if status in (401, 403):
            return self.error(f"refused the credentials (HTTP {status}); check {setting}.api_key")
        if status in (404, 405):
            return self.error(
                f"has no {path} endpoint at the configured address; check {setting}.base_url"
            )
        if status == 413:
            return self.error("refused the file as too large (HTTP 413)")
        detail = self._redact(server_message(response), limit=200)
        return self.error(f"answered HTTP {status}" + (f": {detail}" if detail else ""))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


class Transcriber:
    """Speech to text; the file name's extension tells OpenAI's API the format, so it is
    derived from the sniffed type."""

    def __init__(self, client: MediaClient, *, model: str, language: str = "") -> None:
        self._client = client
        self._model = model
        self._language = language

    async def transcribe(self, audio: bytes, mime: str) -> str:
        form = {"model": self._model, "response_format": "json"}
        if self._language:
            form["language"] = self._language
        name = "voice" + (extension_for(mime) or ".ogg")
        response = await self._client.post(
            "/audio/transcriptions", data=form, files={"file": (name, audio, mime)}
        )
        text = _transcript(response)
        if text is None:
            raise self._client.error("sent an answer without a transcript")
        return text.strip()

    async def aclose(self) -> None:
        await self._client.aclose()


def _transcript(response: httpx.Response) -> str | None:
    if "json" not in response.headers.get("content-type", ""):
        return response.text
    try:
        data = response.json()
    except ValueError:
        return None
    text = data.get("text") if isinstance(data, dict) else None
    return text if isinstance(text, str) else None


@dataclass(frozen=True)
class Speech:
    data: bytes
    mime: str


class Speaker:
    """Text to speech as OGG/Opus, the format of a Telegram voice note."""

    def __init__(self, client: MediaClient, *, model: str, voice: str) -> None:
        self._client = client
        self._model = model
        self._voice = voice

    async def speak(self, text: str, voice: str = "") -> Speech:
        body = {
            "model": self._model,
            "input": text,
            "voice": voice or self._voice,
            "response_format": "opus",
        }
        response = await self._client.post("/audio/speech", json=body)
        mime = sniff(response.content)
        if not (mime.startswith("audio/") or mime == "video/webm"):
            raise self._client.error(f"sent {mime} instead of audio")
        return Speech(response.content, mime)

    async def aclose(self) -> None:
        await self._client.aclose()


class ImageGenerator:
    def __init__(self, client: MediaClient, *, model: str, size: str) -> None:
        self._client = client
        self._model = model
        self._size = size

    async def generate(self, prompt: str, size: str = "") -> tuple[bytes, str]:
        """The first image generated for `prompt`, and its sniffed MIME type."""
        body: dict[str, Any] = {
            "model": self._model,
            "prompt": prompt,
            "n": 1,
            "size": size or self._size,
        }
        if not self._model.startswith("gpt-image"):
            body["response_format"] = "b64_json"  # gpt-image models always send base64
        response = await self._client.post("/images/generations", json=body)
        data = await self._image_of(response)
        mime = sniff(data)
        if mime not in WEB_IMAGES:
            raise self._client.error(f"sent {mime} instead of an image")
        return data, mime

    async def _image_of(self, response: httpx.Response) -> bytes:
        try:
            first = response.json()["data"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise self._client.error("sent an answer without an image") from None
        if isinstance(first, dict) and isinstance(first.get("b64_json"), str):
            try:
                return base64.b64decode(first["b64_json"], validate=True)
            except (binascii.Error, ValueError):
                raise self._client.error("sent an image that is not valid base64") from None
        if isinstance(first, dict) and isinstance(first.get("url"), str):
            return await self._client.get_bytes(first["url"])
        raise self._client.error("sent an answer without an image")

    async def aclose(self) -> None:
        await self._client.aclose()
