"""Discord's access rules: allowed guilds, channels, users and roles, and whether DMs are taken.

Places and people are checked separately: a message must come from an allowed place (guild,
then channel; a thread counts as its parent channel) and from an allowed person (listed user
or holder of a listed role). Empty lists allow everything. In DMs roles are unknown, so only
`allowed_users` can admit someone there when either list is set.
"""

from __future__ import annotations

from adapters.discord.normalize import PLATFORM
from adapters.discord.settings import DiscordSettings
from gateway.sdk import ChatKind, ChatRef, Inbound, UserRef

NO_DMS = "I do not take direct messages here; mention me in a server channel instead."
NOT_HERE = "I am not enabled in this channel; ask a server admin, or use a channel where I am."
NOT_ALLOWED = "Sorry, you are not allowed to use this bot. Ask a server admin to add you."


class DiscordAccess:
    def __init__(self, settings: DiscordSettings) -> None:
        self._allow_dms = settings.allow_dms
        self._guilds = frozenset(settings.allowed_guilds)
        self._channels = frozenset(settings.allowed_channels)
        self._users = frozenset(settings.allowed_users)
        self._roles = frozenset(settings.allowed_roles)

    def reason(self, chat: ChatRef, user: UserRef) -> str | None:
        """None when `user` may use the bot in `chat`, else one sentence saying why not."""
        if chat.platform != PLATFORM:
            return None
        if chat.kind is ChatKind.DIRECT:
            if not self._allow_dms:
                return NO_DMS
        else:
            if self._guilds and chat.space_id not in self._guilds:
                return NOT_HERE
            if self._channels and not {chat.chat_id, chat.thread_id} & self._channels:
                return NOT_HERE
        if (self._users or self._roles) and not (
            user.user_id in self._users or self._roles.intersection(user.roles)
        ):
            return NOT_ALLOWED
        return None

    def rule(self, inbound: Inbound) -> str | None:
        """The form `Extensions.add_access_rule` takes."""
        return self.reason(inbound.chat, inbound.sender)
