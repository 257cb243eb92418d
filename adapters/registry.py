"""Every platform chatgate knows: one line per platform plugin (adapters/<name>/plugin.py).

Adding a platform is a folder under adapters/ with a `plugin.py` that exports `PLUGIN`,
and its module name here. Only the composition root (gateway/app/app.py, gateway/app/cli.py)
reads this list.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
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


def platform_name(module: str) -> str:
    """The platform a plugin module in PLATFORMS is for: its folder (`adapters/<name>/`),
    which is also its PLUGIN's name and settings section."""
    return module.split(".")[1]


@cache
def _load(module: str) -> PlatformPlugin[Any]:
    plugin = importlib.import_module(module).PLUGIN
    assert isinstance(plugin, PlatformPlugin), f"{module}.PLUGIN is not a PlatformPlugin"
    return plugin


def plugins() -> tuple[PlatformPlugin[Any], ...]:
    return tuple(_load(module) for module in PLATFORMS)


def plugins_named(names: Collection[str]) -> tuple[PlatformPlugin[Any], ...]:
    """The plugins of the platforms in `names`, in PLATFORMS order; the others' modules (and
    their settings models) are not imported."""
    return tuple(_load(module) for module in PLATFORMS if platform_name(module) in names)


def settings_sections(names: Collection[str] | None = None) -> dict[str, type[BaseModel]]:
    """Each platform's settings section (`[telegram]`, `CHATGATE_TELEGRAM__*` ...); with
    `names`, only the sections of the platforms among them."""
    found = plugins() if names is None else plugins_named(names)
    return {plugin.name: plugin.settings for plugin in found}


def plugin(name: str) -> PlatformPlugin[Any]:
    for found in plugins_named((name,)):
        return found
    raise KeyError(f"no platform plugin named {name!r}")
