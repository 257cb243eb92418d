"""What an MCP tool call gives back, turned into the text the model reads.

Text becomes the result; embedded text resources are included with their URI; images, audio
and binary resources become a short note ("[image: image/png, 12 KB]") and are kept as
`MediaPart`s on the `ToolOutput`; when the turn's model can see images, the tool shows the
images to it after the results (gateway/turn/agent.py, `ShownImages`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Literal

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)


@dataclass(frozen=True)
class MediaPart:
    kind: Literal["image", "audio", "file"]
    mime_type: str
    data: bytes
    uri: str = ""  # set for an embedded resource

    def note(self) -> str:
        where = f" {self.uri}" if self.uri else ""
        return f"[{self.kind}{where}: {self.mime_type}, {human_size(len(self.data))}]"


@dataclass(frozen=True)
class ToolOutput:
    text: str  # capped; what the model reads
    media: tuple[MediaPart, ...] = ()
    is_error: bool = False


def tool_output(result: CallToolResult, *, max_chars: int) -> ToolOutput:
    parts: list[str] = []
    media: list[MediaPart] = []
    for block in result.content:
        text, part = _block(block)
        if part is not None:
            media.append(part)
        if text:
            parts.append(text)
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts) if parts else "(no output)"
    return ToolOutput(cap(text, max_chars), tuple(media), result.is_error)


def cap(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = len(text) - max_chars
    return (
        f"{text[:max_chars]}\n[... {cut} more characters cut: the output is capped at {max_chars}]"
    )


def human_size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _block(block: ContentBlock) -> tuple[str, MediaPart | None]:
    if isinstance(block, TextContent):
        return block.text, None
    if isinstance(block, ImageContent | AudioContent):
        kind: Literal["image", "audio"] = "image" if isinstance(block, ImageContent) else "audio"
        data = _decode(block.data)
        if data is None:
            return f"[{kind}: {block.mime_type}, unreadable data]", None
        part = MediaPart(kind, block.mime_type, data)
        return part.note(), part
    if isinstance(block, ResourceLink):
        about = f" - {block.description}" if block.description else ""
        return f"[resource link: {block.name} {block.uri}{about}]", None
    if isinstance(block, EmbeddedResource):
        return resource_text(block.resource)
    return f"[unsupported content: {getattr(block, 'type', type(block).__name__)}]", None


def resource_text(
    contents: TextResourceContents | BlobResourceContents,
) -> tuple[str, MediaPart | None]:
    """A resource's contents as text, or a note and the bytes for binary contents."""
    if isinstance(contents, TextResourceContents):
        return f"[resource {contents.uri}]\n{contents.text}", None
    mime = contents.mime_type or "application/octet-stream"
    data = _decode(contents.blob)
    if data is None:
        return f"[resource {contents.uri}: {mime}, unreadable data]", None
    kind: Literal["image", "audio", "file"] = (
        "image" if mime.startswith("image/") else "audio" if mime.startswith("audio/") else "file"
    )
    part = MediaPart(kind, mime, data, uri=str(contents.uri))
    return part.note(), part


def _decode(data: str) -> bytes | None:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None
