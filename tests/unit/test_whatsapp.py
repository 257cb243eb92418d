"""The WhatsApp adapter's pure parts: webhook signature and shape checks, payloads turned into
messages, message bodies within WhatsApp's limits, the markup, and the 24-hour window."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.whatsapp import messages
from adapters.whatsapp.markup import to_whatsapp
from adapters.whatsapp.normalize import read_webhook
from adapters.whatsapp.plugin import PLUGIN as WHATSAPP
from adapters.whatsapp.request_check import parse_body, signed
from adapters.whatsapp.window import WINDOW_SECONDS, CustomerWindows
from gateway.app.app import load_settings
from gateway.config import ConfigError
from gateway.sdk import AttachmentKind, Button, OutboundFile
from gateway.store.embedded import EmbeddedStore

PHONE = "106540352242922"


def notification(
    *messages_: dict[str, Any], statuses: Sequence[dict[str, Any]] = (), phone: str = PHONE
) -> dict[str, Any]:
    value: dict[str, Any] = {
        "messaging_product": "whatsapp",
        "metadata": {"display_phone_number": "15550100199", "phone_number_id": phone},
        "contacts": [{"profile": {"name": "Ana"}, "wa_id": "15551230001"}],
        "messages": list(messages_),
    }
    if statuses:
        value["statuses"] = list(statuses)
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"value": value, "field": "messages"}]}],
    }


def message(kind: str, part: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "from": "15551230001",
        "id": "wamid.A",
        "timestamp": "1700000000",
        "type": kind,
        kind: part,
    } | extra


# -- signature and shape ---------------------------------------------------------------------


def test_signature_is_hmac_sha256_of_the_raw_bytes() -> None:
    raw = b'{"object":"whatsapp_business_account"}'
    good = "sha256=" + hmac.new(b"s3cret", raw, hashlib.sha256).hexdigest()
    assert signed(b"s3cret", raw, good)
    assert not signed(b"s3cret", raw + b" ", good)  # re-serialised JSON would not match
    assert not signed(b"other", raw, good)
    assert not signed(b"s3cret", raw, good.upper())
    assert not signed(b"s3cret", raw, good.removeprefix("sha256="))
    assert not signed(b"s3cret", raw, "")
    assert not signed(b"", raw, "sha256=" + hmac.new(b"", raw, hashlib.sha256).hexdigest())
    assert not signed(b"s3cret", raw, "sha256=\udcff")


@pytest.mark.parametrize(
    "body",
    [
        {
            "object": "whatsapp_business_account",
            "entry": [
                {"changes": [{"field": "messages", "value": {"contacts": [{"profile": "Ana"}]}}]}
            ],
        },
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "changes": [
                        {
                            "field": "messages",
                            "value": {"messages": [{"from": "+1 555", "id": "x", "type": "text"}]},
                        }
                    ]
                }
            ],
        },
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messages": [
                                    {"from": "1", "id": "x", "type": "text", "context": "x"}
                                ]
                            },
                        }
                    ]
                }
            ],
        },
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messages": [
                                    {
                                        "from": "1",
                                        "id": "x",
                                        "type": "interactive",
                                        "interactive": {"button_reply": []},
                                    }
                                ]
                            },
                        }
                    ]
                }
            ],
        },
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "changes": [
                        {
                            "field": "messages",
                            "value": {"statuses": [{"id": "x", "status": "read", "errors": "no"}]},
                        }
                    ]
                }
            ],
        },
        {"object": "whatsapp_business_account", "entry": [{"changes": "x"}]},
    ],
)
def test_shapes_the_adapter_cannot_read_are_refused(body: dict[str, Any]) -> None:
    parsed, problem = parse_body(json.dumps(body).encode())
    assert parsed is None and problem


def test_other_fields_and_other_numbers_are_not_read() -> None:
    body = notification(message("text", {"body": "hi"}), phone="999")
    body["entry"][0]["changes"].append({"field": "account_update", "value": "anything"})
    parsed, problem = parse_body(json.dumps(body).encode())
    assert problem == "" and parsed is not None
    content = read_webhook(parsed, PHONE)
    assert content.messages == [] and content.skipped == ["another number"]


# -- payloads to messages --------------------------------------------------------------------


def test_text_with_reply_context_and_name() -> None:
    body = notification(
        message("text", {"body": "which one?"}, context={"from": "1", "id": "wamid.Q"})
    )
    [received] = read_webhook(body, PHONE).messages
    inbound = received.inbound
    assert inbound.text == "[in reply to message wamid.Q]\nwhich one?"
    assert inbound.chat.chat_id == "15551230001" and inbound.chat.kind == "direct"
    assert inbound.sender.display_name == "Ana" and inbound.event_id == "wamid.A"
    assert received.at == 1700000000.0 and inbound.mentioned


def test_media_voice_and_documents_become_attachments() -> None:
    voice = message("audio", {"id": "111", "mime_type": "audio/ogg; codecs=opus", "voice": True})
    doc = message(
        "document",
        {"id": "222", "mime_type": "application/pdf", "filename": "q3.pdf", "caption": "numbers"},
        id="wamid.B",
    )
    photo = message("image", {"id": "333", "mime_type": "image/jpeg"}, id="wamid.C")
    found = read_webhook(notification(voice, doc, photo), PHONE).messages
    kinds = [(r.inbound.attachments[0].kind, r.inbound.attachments[0].file_id) for r in found]
    assert kinds == [
        (AttachmentKind.VOICE, "111"),
        (AttachmentKind.DOCUMENT, "222"),
        (AttachmentKind.IMAGE, "333"),
    ]
    assert found[0].inbound.attachments[0].mime_type == "audio/ogg"
    assert found[1].inbound.text == "numbers" and found[1].inbound.attachments[0].name == "q3.pdf"


def test_button_replies_are_presses_and_reactions_are_text() -> None:
    press = message(
        "interactive",
        {"type": "button_reply", "button_reply": {"id": "ap:1f:once", "title": "Approve once"}},
        context={"from": "1", "id": "wamid.PROMPT"},
    )
    removed = message("reaction", {"message_id": "wamid.X", "emoji": ""}, id="wamid.R0")
    reaction = message("reaction", {"message_id": "wamid.X", "emoji": "👍"}, id="wamid.R1")
    content = read_webhook(notification(press, removed, reaction), PHONE)
    [pressed] = content.presses
    assert pressed.data == "ap:1f:once" and pressed.user.user_id == "15551230001"
    assert pressed.message is not None and pressed.message.message_id == "wamid.PROMPT"
    assert [r.inbound.text for r in content.messages] == ["[reacted 👍 to message wamid.X]"]
    assert content.skipped == ["reaction"]


def test_statuses_with_errors() -> None:
    status = {
        "id": "wamid.S",
        "status": "failed",
        "recipient_id": "1555",
        "errors": [{"code": 131047, "title": "Re-engagement message"}],
    }
    [update] = read_webhook(notification(statuses=[status]), PHONE).statuses
    assert (update.status, update.recipient, update.errors) == (
        "failed",
        "1555",
        ((131047, "Re-engagement message"),),
    )


# -- bodies within WhatsApp's limits ---------------------------------------------------------


def test_three_reply_buttons_then_a_list_for_the_rest() -> None:
    buttons = [Button(label=f"Choice number {n} is quite long", data=f"t:{n}") for n in range(5)]
    bodies = messages.button_bodies("1555", "Pick one", buttons, "wamid.Q")
    first, more = bodies
    reply_buttons = first["interactive"]["action"]["buttons"]
    assert [b["reply"]["id"] for b in reply_buttons] == ["t:0", "t:1", "t:2"]
    assert all(len(b["reply"]["title"]) <= 20 for b in reply_buttons)
    assert first["context"] == {"message_id": "wamid.Q"} and "context" not in more
    rows = more["interactive"]["action"]["sections"][0]["rows"]
    assert [r["id"] for r in rows] == ["t:3", "t:4"]
    assert (
        rows[0]["title"] == "Choice number 3 is…"
        and rows[0]["description"] == "Choice number 3 is quite long"
    )


def test_button_titles_cut_to_the_same_text_stay_distinct() -> None:
    buttons = [Button(label=f"Approve for the session {n}", data=f"t:{n}") for n in range(2)]
    [body] = messages.button_bodies("1555", "Pick", buttons, None)
    titles = [b["reply"]["title"] for b in body["interactive"]["action"]["buttons"]]
    assert len(set(titles)) == 2 and all(len(t) <= 20 for t in titles)


def test_a_long_question_goes_first_as_text() -> None:
    bodies = messages.button_bodies("1555", "x" * 1500, [Button(label="OK", data="t:1")], None)
    assert [b["type"] for b in bodies] == ["text", "interactive"]
    assert bodies[1]["interactive"]["body"]["text"] == messages.CHOOSE


def test_template_parameter_is_one_line_within_the_limit() -> None:
    body = messages.template_body(
        "1555", "notice", "en_US", "Reminder:\n\tstretch     now" + "!" * 2000
    )
    [param] = body["template"]["components"][0]["parameters"]
    assert param["text"].startswith("Reminder: stretch now") and len(param["text"]) <= 900
    assert "\n" not in param["text"] and "  " not in param["text"]


@pytest.mark.parametrize(
    ("kind", "mime", "size", "expected"),
    [
        (AttachmentKind.IMAGE, "image/png", 1000, "image"),
        (AttachmentKind.IMAGE, "image/webp", 1000, "document"),
        (AttachmentKind.IMAGE, "image/jpeg", 6 * 1024 * 1024, "document"),
        (AttachmentKind.VOICE, "audio/ogg", 1000, "audio"),
        (AttachmentKind.AUDIO, "audio/wav", 1000, "document"),
        (AttachmentKind.DOCUMENT, "application/pdf", 1000, "document"),
    ],
)
def test_media_type(kind: AttachmentKind, mime: str, size: int, expected: str) -> None:
    file = OutboundFile(kind=kind, name="f", mime_type=mime, data=b"x" * size)
    assert messages.media_type(file) == expected


def test_audio_takes_no_caption_and_documents_keep_their_name() -> None:
    voice = OutboundFile(kind=AttachmentKind.VOICE, name="v.ogg", mime_type="audio/ogg", data=b"x")
    assert "caption" not in messages.media_body("1", "audio", "9", voice, "hello", None)["audio"]
    pdf = OutboundFile(
        kind=AttachmentKind.DOCUMENT, name="r.pdf", mime_type="application/pdf", data=b"x"
    )
    assert messages.media_body("1", "document", "9", pdf, "hi", None)["document"] == {
        "id": "9",
        "caption": "hi",
        "filename": "r.pdf",
    }


def test_markup() -> None:
    assert to_whatsapp("**bold** and *it* and ~~gone~~") == "*bold* and _it_ and ~gone~"
    assert (
        to_whatsapp("# Plan\n[docs](https://x.test) `a**b**`")
        == "*Plan*\ndocs (https://x.test) `a**b**`"
    )
    assert to_whatsapp("```\nx = 2**3\n```") == "```x = 2**3```"
    assert to_whatsapp("2 * 3 * 4") == "2 * 3 * 4"


# -- the window ------------------------------------------------------------------------------


async def test_window_opens_closes_and_never_moves_back(embedded_store: EmbeddedStore) -> None:
    windows = CustomerWindows(embedded_store)
    now = time.time()
    assert not await windows.is_open("1555")
    await windows.opened("1555", "wamid.NEW", now - 3600)
    assert await windows.is_open("1555")
    assert not await windows.is_open("1555", now=now - 3600 + WINDOW_SECONDS)
    await windows.opened("1555", "wamid.OLD", now - 7200)  # a redelivered older message
    assert await windows.last("1555") == (now - 3600, "wamid.NEW")
    await windows.closed("1555")
    assert not await windows.is_open("1555")


# -- nothing that passes the shape check makes the reader raise -----------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_field_names = st.sampled_from(
    [
        "from",
        "id",
        "type",
        "text",
        "image",
        "audio",
        "interactive",
        "context",
        "reaction",
        "timestamp",
        "button_reply",
        "list_reply",
        "emoji",
        "message_id",
        "voice",
        "caption",
        "body",
        "status",
        "errors",
        "recipient_id",
        "code",
        "title",
        "mime_type",
        "filename",
    ]
)
_objects = st.dictionaries(
    _field_names, _json | st.dictionaries(_field_names, _json, max_size=4), max_size=6
)


@settings(max_examples=100, deadline=None)
@given(messages_=st.lists(_objects, max_size=3), statuses=st.lists(_objects, max_size=2))
def test_whatever_passes_the_shape_check_is_read_without_raising(
    messages_: list[dict[str, Any]], statuses: list[dict[str, Any]]
) -> None:
    for found in messages_:
        found.setdefault("from", "1555")
        found.setdefault("id", "wamid.X")
        found.setdefault("type", "text")
    body = notification(*messages_, statuses=statuses)
    parsed, _problem = parse_body(json.dumps(body).encode())
    if parsed is not None:
        read_webhook(parsed, PHONE)


def test_settings_name_what_is_missing() -> None:
    with pytest.raises(ConfigError, match=r"whatsapp\.app_secret, whatsapp\.verify_token"):
        load_settings(None, whatsapp={"access_token": "EAA1", "phone_number_id": "1"})
    # not configured: no error
    assert WHATSAPP.section(load_settings(None)).access_token is None


@pytest.mark.parametrize("stamp", ["99999999999", "soon", "-5", "1e400"])
def test_a_future_or_odd_timestamp_counts_as_now(stamp: str) -> None:
    before = time.time()
    [received] = read_webhook(
        notification(message("text", {"body": "hi"}, timestamp=stamp)), PHONE
    ).messages
    assert before <= received.at <= time.time()
