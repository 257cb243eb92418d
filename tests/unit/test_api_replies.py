"""How an API response reads a turn's messages: text states as stream deltas, questions with
their choices, and which conversation and text a request carries."""

from __future__ import annotations

import base64

import pytest

from adapters.api.content import ContentError, newest_user_message
from adapters.api.replies import StreamText, client_text, joined
from adapters.api.routes import _conversation
from gateway.approvals.records import ApprovalChoice
from gateway.sdk.messages import Button
from gateway.web.transcript import ChatMessage

PNG = bytes.fromhex(  # a valid 1x1 RGBA PNG
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000b49444154789c6360000200000500017a5eab3f0000000049454e44ae426082"
)


def message(mid: str, text: str, buttons: list[list[Button]] | None = None) -> ChatMessage:
    return ChatMessage(id=mid, role="bot", text=text, buttons=buttons or [], ts=0.0)


def test_a_growing_reply_streams_as_its_new_characters() -> None:
    stream = StreamText()
    deltas = [
        stream.feed(message("1", "Once")),
        stream.feed(message("1", "Once upon")),
        stream.feed(message("1", "Once upon")),  # the same state again: nothing
        stream.feed(message("1", "Once upon a time.")),
        stream.feed(message("2", "A second message.")),
    ]
    assert deltas == ["Once", " upon", "", " a time.", "\n\nA second message."]
    assert stream.text == "Once upon a time.\n\nA second message."


def test_a_rewritten_message_is_sent_again_whole() -> None:
    approve = Button(label="Approve once", data=ApprovalChoice("abc", "once").pack())
    stream = StreamText()
    assert stream.feed(message("1", "Approval needed: rm -rf x", [[approve]])) == (
        "Approval needed: rm -rf x"
    )
    assert stream.feed(message("2", "Working")) == "\n\nWorking"
    # The prompt is edited to its outcome: a stream cannot take text back, so it comes anew.
    assert stream.feed(message("1", "Approved by ops.")) == "\n\nApproved by ops."
    assert stream.feed(message("2", "Working on it")) == "\n\nWorking on it"
    assert stream.showed(message("2", "Working on it"))
    assert not stream.showed(message("2", "Working on it more"))


def test_questions_show_their_choices_approvals_do_not() -> None:
    question = message(
        "1",
        "Which colour?",
        [[Button(label="red", data="cq:q1:0"), Button(label="blue", data="cq:q1:1")]],
    )
    assert client_text(question) == (
        "Which colour?\n\n1. red\n2. blue\n\nReply with your answer (or the number of a choice)."
    )
    approve = Button(label="Approve once", data=ApprovalChoice("abc", "once").pack())
    assert client_text(message("2", "Approval needed", [[approve]])) == "Approval needed"
    gone = message("3", "deleted").model_copy(update={"deleted": True})
    assert joined([message("0", "first"), gone, message("4", "last")]) == "first\n\nlast"


def test_the_conversation_of_a_request() -> None:
    assert _conversation(None) == "default"
    assert _conversation("  ") == "default"
    assert _conversation("team-notes_1") == "team-notes_1"
    odd = _conversation("alice@example.com")
    assert odd.startswith("h") and odd == _conversation("alice@example.com")
    assert odd != _conversation("bob@example.com") and ":" not in odd


def test_only_the_newest_user_message_is_taken() -> None:
    pixel = base64.b64encode(PNG).decode()
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "new"},
                {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{pixel}"}},
                {"type": "image_url", "image_url": f"data:;base64,{pixel}"},
            ],
        },
    ]
    found = newest_user_message(messages)
    assert found.text == "new"
    # The type is sniffed from the bytes, whatever the URL claims.
    assert [(i.mime_type, i.name, i.data) for i in found.images] == [
        ("image/png", "image.png", PNG),
        ("image/png", "image.png", PNG),
    ]
    assert newest_user_message([{"role": "user", "content": "plain"}]).images == []
    one = f"data:;base64,{pixel}"
    for bad in (
        [],
        "text",
        [{"role": "assistant", "content": "x"}],
        [{"role": "user", "content": ""}],
        [{"role": "user", "content": [{"type": "image_url"}]}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x.png"}}]}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": "data:;base64,"}]}],
        [{"role": "user", "content": [{"type": "file", "file": {}}]}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": one}] * 11}],
    ):
        with pytest.raises(ContentError):
            newest_user_message(bad)
