"""The newest user message of a chat completion request: its text and its images.

Clients such as Open WebUI send an image the person attached as an `image_url` part holding a
`data:` URL; those are taken (and stored like web chat uploads, so the turn's media pipeline
fetches, checks and scales them like any platform's file). An `http(s)` image URL is refused:
the gateway never fetches what a request points at (the same rule as for chat platforms,
which are downloaded from their own file API only).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any

from gateway.sdk.media import safe_name, sniff

MAX_IMAGES = 10  # per message, as in the web chat
_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[^;,]*)*);base64,", re.ASCII)


class ContentError(ValueError):
    """The request's message cannot be taken; the text says why, for a 400 answer."""


@dataclass(frozen=True)
class Image:
    mime_type: str  # sniffed from the bytes, not taken from the URL
    data: bytes

    @property
    def name(self) -> str:
        return safe_name("image", self.mime_type)


@dataclass(frozen=True)
class UserMessage:
    text: str
    images: list[Image] = field(default_factory=list)


def newest_user_message(messages: Any) -> UserMessage:
    """The last user message; earlier ones are in the server's history already."""
    if not isinstance(messages, list) or not messages:
        raise ContentError("'messages' must be a non-empty list.")
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            found = UserMessage(content)
        elif isinstance(content, list):
            found = _parts(content)
        else:
            found = UserMessage("")
        if not found.text.strip() and not found.images:
            raise ContentError("The last user message has neither text nor an image.")
        return found
    raise ContentError("'messages' has no user message.")


def _parts(content: list[Any]) -> UserMessage:
    texts: list[str] = []
    images: list[Image] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("text", "")))
        elif kind == "image_url":
            if len(images) == MAX_IMAGES:
                raise ContentError(f"A message may carry at most {MAX_IMAGES} images.")
            images.append(_image(part.get("image_url")))
        else:
            raise ContentError(
                f"Content parts of type {kind!r} are not taken; send text and image_url parts."
            )
    return UserMessage("\n".join(texts), images)


def _image(value: Any) -> Image:
    url = value.get("url") if isinstance(value, dict) else value
    if not isinstance(url, str) or not url:
        raise ContentError("An image_url part has no url.")
    match = _DATA_URL.match(url)
    if match is None:
        raise ContentError(
            "Images must come as data: URLs (data:image/png;base64,...); this gateway does "
            "not fetch images from the web."
        )
    try:
        data = base64.b64decode(url[match.end() :], validate=True)
    except (binascii.Error, ValueError):
        raise ContentError("An image's data: URL is not valid base64.") from None
    if not data:
        raise ContentError("An image's data: URL is empty.")
    return Image(sniff(data), data)
