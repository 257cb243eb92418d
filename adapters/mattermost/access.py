"""Mattermost's access lists (channels, users) and DMs as a rule for the core's AccessPolicy."""

from __future__ import annotations

from adapters.mattermost.normalize import PLATFORM
from adapters.mattermost.settings import MattermostSettings
from gateway.sdk import NOT_ALLOWED, ChatKind, ChatRef, Inbound, UserRef

NO_DMS = "I do not take direct messages here; mention me in a channel instead."
NOT_HERE = (
    "I am not enabled in this channel; ask the operator to add it to mattermost.allowed_channels."
)


class MattermostAccess:
    def __init__(self, settings: MattermostSettings) -> None:
        self._allow_dms = settings.allow_dms
        self._channels = frozenset(settings.allowed_channels)
        self._users = frozenset(settings.allowed_users)

    def reason(self, chat: ChatRef, user: UserRef) -> str | None:
        """None when `user` may use the bot in `chat`, else one sentence saying why not."""
        if chat.platform != PLATFORM:
            return None
        if chat.kind is ChatKind.DIRECT:
            if not self._allow_dms:
                return NO_DMS
        elif self._channels and chat.chat_id not in self._channels:
            return NOT_HERE
        if self._users and user.user_id not in self._users:
            return NOT_ALLOWED
        return None

    def rule(self, inbound: Inbound) -> str | None:
        """The form `Extensions.add_access_rule` takes."""
        return self.reason(inbound.chat, inbound.sender)
