"""Image content parts in chat messages: finding them, and taking them out for a model that
refuses images (`llm.vision = auto`), so the rest of the request still goes through.
"""

from __future__ import annotations

from typing import Any

from gateway.llm.types import Message

IMAGE_PART = "image_url"


def image_part(data_url: str) -> dict[str, Any]:
    """An OpenAI `image_url` content part (the URL is a `data:` URL; nothing is fetched)."""
    return {"type": IMAGE_PART, "image_url": {"url": data_url}}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def has_images(messages: list[Message]) -> bool:
    # Runs on every completion over the whole history: plain string contents are skipped
    # without building anything.
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and _is_image(part) for part in content
        ):
            return True
    return False


def without_images(messages: list[Message], note: str) -> list[Message]:
    """The messages with every image part replaced by `note`; a content list left with text
    only becomes one string again, which every server reads. The input is not modified."""
    out: list[Message] = []
    for message in messages:
        parts = _parts(message)
        if not any(_is_image(part) for part in parts):
            out.append(message)
            continue
        texts = [note if _is_image(part) else str(part.get("text", "")) for part in parts]
        out.append({**message, "content": "\n\n".join(t for t in texts if t)})
    return out


def _parts(message: Message) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [part for part in content if isinstance(part, dict)]
    return []


def _is_image(part: dict[str, Any]) -> bool:
    return part.get("type") == IMAGE_PART
