"""The terminal as a platform plugin, registered like the chat platforms; only the terminal
commands (`chat`, `ask`) start it."""

from __future__ import annotations

from adapters.console.adapter import PLATFORM, ConsoleAdapter
from adapters.console.settings import ConsoleSettings
from gateway.sdk import Adapter, AdapterContext, PlatformPlugin


def _build(settings: ConsoleSettings, ctx: AdapterContext) -> Adapter:
    return ConsoleAdapter(settings.chat_id, settings.user_id, echo=settings.echo)


PLUGIN = PlatformPlugin(
    name=PLATFORM,
    title="Console",
    settings=ConsoleSettings,
    enabled=lambda s: True,
    build=_build,
    runs_in_gateway=False,
)
