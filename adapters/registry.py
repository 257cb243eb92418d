"""Every platform chatgate knows: one line per platform plugin (adapters/<name>/plugin.py).

Adding a platform is a folder under adapters/ with a `plugin.py` that exports `PLUGIN`,
and its module name here. Only the composition root (gateway/app/app.py, gateway/app/cli.py)
reads this list.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any

from pydantic import BaseModel

from gateway.sdk import PlatformPlugin

PLATFORMS = (
    "adapters.telegram.plugin",
    "adapters.slack.plugin",
    "adapters.discord.plugin",
    "adapters.email.plugin",
    "adapters.whatsapp.plugin",
    "adapters.teams.plugin",
    "adapters.mattermost.plugin",
    "adapters.matrix.plugin",
    "adapters.console.plugin",
    "adapters.web.plugin",
    "adapters.api.plugin",
)


@cache
def plugins() -> tuple[PlatformPlugin[Any], ...]:
    found = []
    for module in PLATFORMS:
        plugin = importlib.import_module(module).PLUGIN
        assert isinstance(plugin, PlatformPlugin), f"{module}.PLUGIN is not a PlatformPlugin"
        found.append(plugin)
    return tuple(found)


def settings_sections() -> dict[str, type[BaseModel]]:
    """Each platform's settings section (`[telegram]`, `CHATGATE_TELEGRAM__*` ...)."""
    return {found.name: found.settings for found in plugins()}


def plugin(name: str) -> PlatformPlugin[Any]:
    for found in plugins():
        if found.name == name:
            return found
    raise KeyError(f"no platform plugin named {name!r}")
