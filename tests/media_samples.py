"""Real media bytes for tests (made with Pillow, or minimal valid containers) and readers for
what the gateway sent to the model."""

from __future__ import annotations

import base64
import io
import struct
from typing import Any

from PIL import Image


def jpeg(width: int = 640, height: int = 480, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buffer, format="JPEG", quality=80)
    return buffer.getvalue()


def png(width: int = 320, height: int = 200, *, alpha: bool = False) -> bytes:
    mode, color = ("RGBA", (0, 120, 255, 128)) if alpha else ("RGB", (0, 120, 255))
    buffer = io.BytesIO()
    Image.new(mode, (width, height), color).save(buffer, format="PNG")
    return buffer.getvalue()


def ogg_opus(payload: bytes = b"\x00" * 200) -> bytes:
    """An OGG page holding an OpusHead, then data: what a voice note starts with."""
    head = b"OpusHead" + bytes([1, 1]) + struct.pack("<HIhB", 312, 48000, 0, 0)
    page = b"OggS" + bytes([0, 2]) + b"\x00" * 8 + b"\x01\x00\x00\x00" + b"\x00" * 8
    page += bytes([1, len(head)]) + head
    return page + b"OggS" + payload


PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def image_parts(request: dict[str, Any]) -> list[Image.Image]:
    """The images in the last user message of a chat-completions request, decoded."""
    images: list[Image.Image] = []
    for message in reversed(request["messages"]):
        if message["role"] != "user":
            continue
        content = message["content"]
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                url = part["image_url"]["url"]
                header, _, data = url.partition(",")
                assert header.startswith("data:image/") and header.endswith(";base64")
                image = Image.open(io.BytesIO(base64.b64decode(data)))
                image.load()
                images.append(image)
        break
    return images
