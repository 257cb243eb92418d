"""Session keys per isolation strategy."""

import pytest

from gateway.sdk.messages import ChatKind, ChatRef, Inbound, UserRef
from gateway.sessions.key import Isolation, SessionKey, key_for


def _inbound(thread: str | None = None, user: str = "7") -> Inbound:
    chat = ChatRef(platform="slack", chat_id="C1", thread_id=thread, kind=ChatKind.CHANNEL)
    return Inbound(
        event_id="e", chat=chat, sender=UserRef(platform="slack", user_id=user), text="x"
    )


@pytest.mark.parametrize(
    ("isolation", "thread", "expected"),
    [
        (Isolation.AUTO, None, "slack:C1"),
        (Isolation.AUTO, "123.4", "slack:C1:t123.4"),
        (Isolation.THREAD, "9", "slack:C1:t9"),
        (Isolation.CHAT, "9", "slack:C1"),
        (Isolation.USER_IN_CHAT, None, "slack:C1:u7"),
        (Isolation.USER_IN_CHAT, "9", "slack:C1:t9:u7"),
    ],
)
def test_key_per_isolation(isolation: Isolation, thread: str | None, expected: str) -> None:
    key = key_for(_inbound(thread), isolation)
    assert str(key) == expected
    assert SessionKey.parse(expected) == key


def test_users_share_chat_session_unless_isolated() -> None:
    assert key_for(_inbound(user="1")) == key_for(_inbound(user="2"))
    assert key_for(_inbound(user="1"), Isolation.USER_IN_CHAT) != key_for(
        _inbound(user="2"), Isolation.USER_IN_CHAT
    )


def test_negative_telegram_chat_ids_round_trip() -> None:
    key = SessionKey("telegram", "-1001234", "5")
    assert SessionKey.parse(str(key)) == key
    assert key.chat_scope == "telegram:-1001234"
