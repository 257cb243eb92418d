"""Matrix events as Inbound (adapters/matrix/normalize.py), reactions as buttons
(prompts.py), access lists and settings: recorded event JSON in the shape Synapse sends."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from adapters.matrix.access import MatrixAccess
from adapters.matrix.normalize import BotIdentity, EncryptedFile, inbound_from, relation_of
from adapters.matrix.prompts import legend, reaction_keys
from adapters.matrix.sending import relates_to, text_content
from adapters.matrix.settings import MatrixSettings
from gateway.approvals.records import ApprovalChoice
from gateway.sdk import AttachmentKind, Button, ChatKind, ChatRef, Inbound, UserRef

ME = BotIdentity("@helper:example.org", "Helper")
ROOM = "!room:example.org"


def event(content: dict[str, Any], sender: str = "@alice:example.org") -> dict[str, Any]:
    return {
        "type": "m.room.message",
        "event_id": "$ev1",
        "sender": sender,
        "origin_server_ts": 1_700_000_000_000,
        "content": content,
    }


def text(body: str, **extra: Any) -> dict[str, Any]:
    return event({"msgtype": "m.text", "body": body, **extra})


def test_a_direct_message_is_addressed_and_keeps_its_ids() -> None:
    inbound = inbound_from(text("hello"), ROOM, ME, direct=True, sender_name="Alice")
    assert inbound is not None
    assert inbound.mentioned and inbound.text == "hello"
    assert (inbound.event_id, inbound.message_id) == ("$ev1", "$ev1")
    assert inbound.chat == ChatRef(platform="matrix", chat_id=ROOM, kind=ChatKind.DIRECT)
    assert inbound.sender.label == "Alice" and inbound.received_at == 1_700_000_000.0


@pytest.mark.parametrize(
    ("content", "mentioned"),
    [
        ({"msgtype": "m.text", "body": "lunch?"}, False),
        ({"msgtype": "m.text", "body": "Helper, lunch?"}, True),  # display name
        ({"msgtype": "m.text", "body": "helpers are nice"}, False),  # not a word match
        ({"msgtype": "m.text", "body": "hi", "m.mentions": {"user_ids": [ME.user_id]}}, True),
        ({"msgtype": "m.text", "body": "hi", "m.mentions": {"user_ids": ["@bob:x"]}}, False),
        (
            {
                "msgtype": "m.text",
                "body": "hi Helper",
                "formatted_body": '<a href="https://matrix.to/#/@helper:example.org">x</a>',
            },
            True,
        ),
        ({"msgtype": "m.text", "body": "/status"}, True),  # a command is for the bot
    ],
)
def test_room_messages_are_addressed_only_by_a_mention(
    content: dict[str, Any], mentioned: bool
) -> None:
    inbound = inbound_from(event(content), ROOM, ME, direct=False)
    assert inbound is not None and inbound.mentioned is mentioned


def test_edits_notices_own_messages_and_other_events_are_not_messages() -> None:
    edit = text("* fixed", **{"m.relates_to": {"rel_type": "m.replace", "event_id": "$a"}})
    assert inbound_from(edit, ROOM, ME, direct=True) is None
    assert (
        inbound_from(event({"msgtype": "m.notice", "body": "bot"}), ROOM, ME, direct=True) is None
    )
    own = event({"msgtype": "m.text", "body": "x"}, sender=ME.user_id)
    assert inbound_from(own, ROOM, ME, direct=True) is None
    assert inbound_from({**text("x"), "type": "m.sticker"}, ROOM, ME, direct=True) is None
    assert (
        inbound_from({"type": "m.room.message", "content": "junk"}, ROOM, ME, direct=True) is None
    )


def test_a_thread_message_is_in_its_thread_and_a_reply_loses_its_fallback_quote() -> None:
    in_thread = {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$last"},
    }
    inbound = inbound_from(text("go on", **{"m.relates_to": in_thread}), ROOM, ME, direct=False)
    assert inbound is not None and inbound.chat.thread_id == "$root"
    assert relation_of({"m.relates_to": in_thread}).reply_to is None  # only a fallback
    reply = {"m.in_reply_to": {"event_id": "$q"}}
    body = "> <@helper:example.org> the answer\n> more\n\nthanks"
    inbound = inbound_from(text(body, **{"m.relates_to": reply}), ROOM, ME, direct=True)
    assert inbound is not None and inbound.text == "thanks" and inbound.chat.thread_id is None


def test_files_voice_and_encrypted_files_become_attachments() -> None:
    image = event(
        {
            "msgtype": "m.image",
            "body": "board.jpg",
            "url": "mxc://example.org/abc",
            "info": {"mimetype": "image/jpeg", "size": 1234},
        }
    )
    inbound = inbound_from(image, ROOM, ME, direct=True)
    assert inbound is not None and inbound.text == ""
    [attachment] = inbound.attachments
    assert (attachment.kind, attachment.file_id, attachment.size) == (
        AttachmentKind.IMAGE,
        "mxc://example.org/abc",
        1234,
    )
    keys = {"k": "a2V5", "alg": "A256CTR", "kty": "oct", "ext": True, "key_ops": ["decrypt"]}
    file = {"url": "mxc://example.org/v", "key": keys, "iv": "aXY", "hashes": {"sha256": "aGFzaA"}}
    voice = {"msgtype": "m.audio", "body": "v.ogg", "file": file, "org.matrix.msc3245.voice": {}}
    inbound = inbound_from(event(voice), ROOM, ME, direct=True)
    assert inbound is not None
    [attachment] = inbound.attachments
    assert attachment.kind is AttachmentKind.VOICE
    assert EncryptedFile.unpack(attachment.file_id) == EncryptedFile(
        "mxc://example.org/v", "a2V5", "aXY", "aGFzaA"
    )
    captioned = {"msgtype": "m.file", "body": "see this", "filename": "r.pdf", "url": "mxc://e/r"}
    inbound = inbound_from(event(captioned), ROOM, ME, direct=True)
    assert inbound is not None and inbound.text == "see this"
    assert inbound.attachments[0].name == "r.pdf"
    no_url = {"msgtype": "m.file", "body": "x", "url": "https://elsewhere/x"}
    assert inbound_from(event(no_url), ROOM, ME, direct=True) is None


def test_approval_buttons_become_the_reactions_people_expect() -> None:
    rows = (
        (
            Button(label="Approve once", data=ApprovalChoice("r1", "once").pack()),
            Button(label="Approve for session", data=ApprovalChoice("r1", "session").pack()),
            Button(label="Deny", data=ApprovalChoice("r1", "deny").pack()),
        ),
    )
    keys = reaction_keys(rows)
    assert list(keys) == ["✅", "🔁", "❌"]
    assert legend(keys).strip() == "React with ✅ Approve once · 🔁 Approve for session · ❌ Deny."
    other = reaction_keys(((Button(label="Yes", data="x:1"), Button(label="No", data="x:2")),))
    assert list(other) == ["1️⃣", "2️⃣"]


def test_replies_thread_and_quote_only_where_it_helps() -> None:
    room = ChatRef(platform="matrix", chat_id=ROOM, kind=ChatKind.GROUP)
    dm = room.model_copy(update={"kind": ChatKind.DIRECT})
    assert relates_to(room, "$q") == {"m.in_reply_to": {"event_id": "$q"}}
    assert relates_to(dm, "$q") is None
    in_thread = relates_to(room.model_copy(update={"thread_id": "$root"}), None)
    assert in_thread == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$root"},
    }
    content = text_content("**bold** <script>")
    assert content["formatted_body"] == "<p><strong>bold</strong> &lt;script&gt;</p>"
    assert content["m.mentions"] == {}  # the bot's messages ping nobody


def inbound_of(user: str, room: str) -> Inbound:
    chat = ChatRef(platform="matrix", chat_id=room, kind=ChatKind.GROUP)
    return Inbound(
        event_id="$e", chat=chat, sender=UserRef(platform="matrix", user_id=user), text="x"
    )


def test_access_lists_and_invites() -> None:
    settings = MatrixSettings(allowed_users=["@alice:x"], allowed_rooms=["!team:x"])
    access = MatrixAccess(settings)
    assert access.rule(inbound_of("@alice:x", "!other:x")) is None
    assert access.rule(inbound_of("@bob:x", "!team:x")) is None
    assert access.rule(inbound_of("@bob:x", "!other:x")) is not None
    assert access.accepts_invite("@alice:x", "!new:x")
    assert not access.accepts_invite("@bob:x", "!team:x")  # a listed room vouches for nobody
    everyone = MatrixAccess(MatrixSettings())
    assert everyone.accepts_invite("@anyone:x", "!r:x")
    assert everyone.rule(inbound_of("@anyone:x", "!r:x")) is None


def test_settings_need_a_login_with_the_homeserver() -> None:
    assert not MatrixSettings().configured
    with pytest.raises(ValidationError, match="access_token"):
        MatrixSettings(homeserver="https://matrix.example.org", user_id="@bot:example.org")
    with pytest.raises(ValidationError):
        MatrixSettings(user_id="bot")  # not a Matrix user id
    ok = MatrixSettings(
        homeserver="https://matrix.example.org", user_id="@bot:example.org", password="pw"
    )
    assert ok.configured
