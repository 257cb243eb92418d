"""The bodies of Cloud API message requests, built from the core's Outbound: text split to
WhatsApp's limits, reply buttons and list messages, templates, media and read receipts. Pure
functions, so every limit is tested without a network."""

from __future__ import annotations

import re
from typing import Any

from adapters.whatsapp.markup import to_whatsapp
from gateway.sdk import AttachmentKind, Button, OutboundFile, split_text

Body = dict[str, Any]

MAX_TEXT = 4096  # a text message's body
MAX_INTERACTIVE_BODY = 1024
MAX_CAPTION = 1024
MAX_REPLY_BUTTONS = 3
MAX_BUTTON_TITLE = 20
MAX_LIST_ROWS = 10
MAX_ROW_TITLE = 24
MAX_ROW_DESCRIPTION = 72
MAX_TEMPLATE_PARAMETER = 900  # the template's own words share the body's 1024 characters
MORE_CHOICES = "More choices"
MORE_CHOICES_BODY = "More choices for the question above."
CHOOSE = "Choose:"

# What WhatsApp plays or shows inline; anything else goes as a document.
_INLINE_TYPES = {
    "image": ({"image/jpeg", "image/png"}, 5 * 1024 * 1024),
    "audio": (
        {"audio/aac", "audio/amr", "audio/mpeg", "audio/mp4", "audio/ogg"},
        16 * 1024 * 1024,
    ),
    "video": ({"video/mp4", "video/3gpp"}, 16 * 1024 * 1024),
}
MAX_DOCUMENT = 100 * 1024 * 1024
_WHITESPACE = re.compile(r"\s+")


def envelope(to: str, kind: str, payload: Any, reply_to: str | None = None) -> Body:
    body: Body = {
        "messaging_product": "whatsapp",
        "recipient_type": "individual",
        "to": to,
        "type": kind,
        kind: payload,
    }
    if reply_to:
        body["context"] = {"message_id": reply_to}
    return body


def render(text: str, markdown: bool) -> str:
    rendered = to_whatsapp(text) if markdown else text
    return rendered if rendered.strip() else "…"  # WhatsApp refuses an empty body


def text_bodies(to: str, text: str, reply_to: str | None) -> list[Body]:
    parts = split_text(text, MAX_TEXT)
    return [
        envelope(to, "text", {"body": part, "preview_url": False}, reply_to if n == 0 else None)
        for n, part in enumerate(parts)
    ]


def button_bodies(to: str, text: str, buttons: list[Button], reply_to: str | None) -> list[Body]:
    """Text with buttons: up to three reply buttons on the question; more choices go in a
    list message after it. A question longer than an interactive body is sent as text
    first, and the buttons follow under "Choose:"."""
    bodies: list[Body] = []
    if len(text) > MAX_INTERACTIVE_BODY:
        bodies += text_bodies(to, text, reply_to)
        text, reply_to = CHOOSE, None
    first, rest = buttons[:MAX_REPLY_BUTTONS], buttons[MAX_REPLY_BUTTONS:]
    titles = _unique([_cut(b.label, MAX_BUTTON_TITLE) for b in first], MAX_BUTTON_TITLE)
    reply_buttons = [
        {"type": "reply", "reply": {"id": b.data, "title": title}}
        for b, title in zip(first, titles, strict=True)
    ]
    interactive = {"type": "button", "body": {"text": text}, "action": {"buttons": reply_buttons}}
    bodies.append(envelope(to, "interactive", interactive, reply_to))
    for start in range(0, len(rest), MAX_LIST_ROWS):
        bodies.append(
            envelope(to, "interactive", list_message(rest[start : start + MAX_LIST_ROWS]))
        )
    return bodies


def list_message(buttons: list[Button]) -> Body:
    rows = []
    for b in buttons:
        row = {"id": b.data, "title": _cut(b.label, MAX_ROW_TITLE)}
        if len(b.label) > MAX_ROW_TITLE:
            row["description"] = _cut(b.label, MAX_ROW_DESCRIPTION)
        rows.append(row)
    return {
        "type": "list",
        "body": {"text": MORE_CHOICES_BODY},
        "action": {"button": MORE_CHOICES, "sections": [{"title": MORE_CHOICES, "rows": rows}]},
    }


def template_body(to: str, name: str, language: str, text: str) -> Body:
    """The configured template with the message as its one body parameter ({{1}}): WhatsApp
    refuses parameters with line breaks, tabs or more than four spaces in a row."""
    flat = _WHITESPACE.sub(" ", text).strip() or "…"
    template = {
        "name": name,
        "language": {"code": language},
        "components": [
            {
                "type": "body",
                "parameters": [{"type": "text", "text": _cut(flat, MAX_TEMPLATE_PARAMETER)}],
            }
        ],
    }
    return envelope(to, "template", template)


def media_type(file: OutboundFile) -> str:
    """How WhatsApp takes this file: image, audio, video (inline) or document."""
    wanted = {
        AttachmentKind.IMAGE: "image",
        AttachmentKind.VOICE: "audio",
        AttachmentKind.AUDIO: "audio",
        AttachmentKind.VIDEO: "video",
    }.get(file.kind, "document")
    mime = file.mime_type.split(";", 1)[0].strip()
    inline = _INLINE_TYPES.get(wanted)
    if inline is not None and (mime not in inline[0] or file.size > inline[1]):
        return "document"
    return wanted


def media_body(
    to: str, kind: str, media_id: str, file: OutboundFile, caption: str, reply_to: str | None
) -> Body:
    payload: Body = {"id": media_id}
    if caption and kind != "audio":  # audio messages take no caption
        payload["caption"] = _cut(caption, MAX_CAPTION)
    if kind == "document":
        payload["filename"] = file.name
    return envelope(to, kind, payload, reply_to)


def read_receipt(message_id: str, typing: bool) -> Body:
    """Marks a received message read; with `typing`, shows "typing…" (until the reply, at
    most 25 seconds)."""
    body: Body = {"messaging_product": "whatsapp", "status": "read", "message_id": message_id}
    if typing:
        body["typing_indicator"] = {"type": "text"}
    return body


def _unique(titles: list[str], limit: int) -> list[str]:
    """WhatsApp refuses two buttons of one message with the same title: number repeats."""
    seen: set[str] = set()
    found = []
    for n, title in enumerate(titles, 1):
        if title in seen:
            title = _cut(title, limit - 3) + f" {n}"
        seen.add(title)
        found.append(title)
    return found


def _cut(text: str, limit: int) -> str:
    """`text` in at most `limit` characters, cut at a word when one ends near the limit."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space >= limit - 10:
        head = head[:space]
    return head.rstrip() + "…"
