"""`[media]` (files in and out of the chat) and the media endpoints `[stt]`, `[tts]`,
`[images]` (gateway/media/)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from gateway.config.base import HOUR, Section, http_url


class MediaSettings(Section):
    """Files in and out of the chat (gateway/media/)."""

    # Long side of images sent to the model.
    max_image_px: int = Field(default=1568, ge=64, le=20_000)
    max_images: int = Field(default=4, ge=1, le=100)  # image parts in one request
    # Earlier images are sent again when the person refers to them within this many turns.
    image_lookback_turns: int = Field(default=3, ge=0, le=1000)
    max_download_mb: float = Field(default=20.0, gt=0, le=10_000)  # any file from a platform
    # Any file sent (platforms cap it lower).
    max_upload_mb: float = Field(default=50.0, gt=0, le=10_000)
    # Text read from documents people send (PDF, DOCX, XLSX, PPTX, ODT, CSV, HTML) and by
    # read_file: at most this many characters per file, and per page, sheet or slide.
    document_max_chars: int = Field(default=40_000, ge=1_000, le=10_000_000)
    document_page_chars: int = Field(default=8_000, ge=200, le=10_000_000)

    @property
    def max_download_bytes(self) -> int:
        return int(self.max_download_mb * 1_000_000)

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1_000_000)


class MediaEndpoint(Section):
    """An OpenAI-compatible media endpoint; an empty api_key borrows llm.api_key only when the
    endpoint is on the LLM's own server (a key is never sent to another host)."""

    base_url: str = ""
    api_key: SecretStr = SecretStr("")
    timeout: float = Field(default=120.0, gt=0, le=HOUR)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return http_url(value, empty_ok=True)


class STTSettings(MediaEndpoint):
    """Speech to text: POST {base_url}/audio/transcriptions (empty base_url: llm.base_url)."""

    enabled: bool = True
    model: str = "whisper-1"
    language: str = ""  # ISO-639-1 hint, e.g. "de"; empty: the server detects it
    echo_transcript: bool = False  # show the person what was understood


class TTSSettings(MediaEndpoint):
    """Text to speech: POST {base_url}/audio/speech; empty base_url: no text_to_speech."""

    model: str = "tts-1"
    voice: str = "alloy"
    # Answer with a voice note too: never, when the person sent one, or always.
    reply_with_voice: Literal["off", "when_voice", "always"] = "off"


class ImagesSettings(MediaEndpoint):
    """Image generation: POST {base_url}/images/generations; empty base_url: no image_generate."""

    model: str = "gpt-image-1"
    # Compiled: Python's re runs it (see adapters/slack/settings.py `slash_command`).
    size: str = Field(default="1024x1024", pattern=re.compile(r"^(auto|\d{2,5}x\d{2,5})\Z"))
