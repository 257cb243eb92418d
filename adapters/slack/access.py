"""Slack's access lists (workspaces, channels, users) as a rule for the core's AccessPolicy."""

from __future__ import annotations

from adapters.slack.normalize import PLATFORM
from adapters.slack.settings import SlackSettings
from gateway.sdk import NOT_ALLOWED, AccessRule, ChatKind, ChatRef, Inbound


class SlackAccess:
    def __init__(self, settings: SlackSettings) -> None:
        self._teams = frozenset(settings.allowed_teams)
        self._channels = frozenset(settings.allowed_channels)
        self._users = frozenset(settings.allowed_users)

    def refusal(self, chat: ChatRef, user_id: str) -> str | None:
        """None when `user_id` may use the bot in `chat`, else one sentence saying why not."""
        if self._teams and chat.space_id not in self._teams:
            return "This Slack workspace is not allowed to use this bot."
        in_channel = chat.kind is not ChatKind.DIRECT
        if self._channels and in_channel and chat.chat_id not in self._channels:
            return (
                "I am not enabled in this channel; ask the operator to add it to "
                "slack.allowed_channels."
            )
        if self._users and user_id not in self._users:
            return NOT_ALLOWED
        return None

    def rule(self) -> AccessRule:
        def check(inbound: Inbound) -> str | None:
            if inbound.chat.platform != PLATFORM:
                return None
            return self.refusal(inbound.chat, inbound.sender.user_id)

        return check
