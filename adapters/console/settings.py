"""Console settings: the `[console]` section, for `chatgate chat` and `chatgate ask`."""

from __future__ import annotations

from gateway.sdk import Section


class ConsoleSettings(Section):
    chat_id: str = "local"  # the conversation: `chatgate chat --chat ID` sets it
    user_id: str = "local"  # who the terminal user is, e.g. for access.admins ("console:local")
    echo: bool = True  # print replies as they are sent (`ask` prints the answer at the end)
