"""`matrix.allowed_users` and `matrix.allowed_rooms` as a rule of the gateway's AccessPolicy,
and who may invite the bot into a room.

A message passes when its sender is listed or its room is; with both lists empty everyone
passes. An invite is accepted only from a listed user (from anyone when allowed_users is
empty): a listed room is one the operator already knows, so it says nothing about a stranger.
"""

from __future__ import annotations

from adapters.matrix.normalize import PLATFORM
from adapters.matrix.settings import MatrixSettings
from gateway.sdk import NOT_ALLOWED, Inbound


class MatrixAccess:
    def __init__(self, settings: MatrixSettings) -> None:
        self._users = frozenset(u.strip() for u in settings.allowed_users)
        self._rooms = frozenset(r.strip() for r in settings.allowed_rooms)

    def allows(self, user_id: str, room_id: str) -> bool:
        if not (self._users or self._rooms):
            return True
        return user_id in self._users or room_id in self._rooms

    def accepts_invite(self, inviter: str, room_id: str) -> bool:
        if self._users:
            return inviter in self._users
        return not self._rooms or room_id in self._rooms

    def rule(self, inbound: Inbound) -> str | None:
        """The AccessPolicy rule: None lets the message through."""
        if inbound.chat.platform != PLATFORM:
            return None
        return None if self.allows(inbound.sender.user_id, inbound.chat.chat_id) else NOT_ALLOWED
