"""`telegram.allowed_users` and `telegram.allowed_chats` as a rule of the gateway's AccessPolicy.

A message passes when its sender is listed (by id or @username) or its chat is listed;
with both lists empty everyone passes. Refusing and telling the person once an hour is
the core's job; this rule only decides.
"""

from __future__ import annotations

from collections import OrderedDict

from adapters.telegram.settings import TelegramSettings
from gateway.sdk import NOT_ALLOWED, Inbound

_REMEMBERED_USERNAMES = 10_000


class TelegramAccess:
    def __init__(self, settings: TelegramSettings, platform: str) -> None:
        self._platform = platform
        entries = [_clean(e) for e in settings.allowed_users]
        self._user_ids = {e for e in entries if _is_id(e)}
        self._usernames = {e.lstrip("@").lower() for e in entries if not _is_id(e)}
        self._chats = {_clean(c) for c in settings.allowed_chats}
        # user id -> @username as last seen; the Inbound carries ids only.
        self._seen: OrderedDict[str, str] = OrderedDict()

    @property
    def restricted(self) -> bool:
        return bool(self._user_ids or self._usernames or self._chats)

    def remember(self, user_id: str, username: str | None) -> None:
        if not username or not self._usernames:
            return
        self._seen[user_id] = username
        self._seen.move_to_end(user_id)
        if len(self._seen) > _REMEMBERED_USERNAMES:
            self._seen.popitem(last=False)

    def allows(self, inbound: Inbound) -> bool:
        if not self.restricted:
            return True
        user = inbound.sender.user_id
        return (
            user in self._user_ids
            or self._seen.get(user, "") in self._usernames
            or inbound.chat.chat_id in self._chats
        )

    def rule(self, inbound: Inbound) -> str | None:
        """The AccessPolicy rule: None lets the message through."""
        if inbound.chat.platform != self._platform or self.allows(inbound):
            return None
        return NOT_ALLOWED


def _clean(entry: str) -> str:
    entry = entry.strip()
    return entry.removeprefix("telegram:")


def _is_id(entry: str) -> bool:
    return entry.lstrip("-").isdigit()
