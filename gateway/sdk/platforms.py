"""What a platform plugin tells the gateway about itself.

Each `adapters/<platform>/plugin.py` exports one `PLUGIN = PlatformPlugin(...)`: the name
of its settings section (`[telegram]`, `CHATGATE_TELEGRAM__*`), the settings model, when
it counts as configured, how to build its adapter and how `doctor` checks it. The
composition root finds them through `adapters/registry.py`; the core never imports an
adapter. A plugin module imports no SDK at import time, so a platform whose SDK is not
installed is reported with the command that installs it instead of failing an import.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel

if TYPE_CHECKING:
    import httpx

from gateway.sdk.channels import Adapter, AdapterContext
from gateway.sdk.checks import CheckResult

S = TypeVar("S", bound=BaseModel)


class PlatformUnavailable(Exception):
    """A configured platform cannot run here (its SDK is missing); the message says the fix."""


@dataclass(frozen=True)
class PlatformPlugin(Generic[S]):
    name: str  # the platform id on messages and the settings section
    title: str  # for people: "Telegram"
    settings: type[S]
    # Configured, so `chatgate run` starts it (e.g. its token is set).
    enabled: Callable[[S], bool]
    build: Callable[[S, AdapterContext], Adapter]
    # `chatgate doctor`: is the platform reachable with these settings?
    check: Callable[[S, httpx.AsyncClient], Awaitable[CheckResult]] | None = None
    requires: tuple[str, ...] = ()  # modules its SDK provides
    extra: str = ""  # the pip extra that installs them: chatgate[<extra>]
    how_to_enable: str = ""  # one line for "no platform is configured"
    runs_in_gateway: bool = True  # False: only terminal commands use it (the console)

    def section(self, settings: BaseModel) -> S:
        value = getattr(settings, self.name)
        assert isinstance(value, self.settings)
        return value

    def missing(self) -> list[str]:
        """The SDK modules this platform needs that are not installed."""
        return [name for name in self.requires if importlib.util.find_spec(name) is None]

    def ensure_installed(self) -> None:
        missing = self.missing()
        if missing:
            raise PlatformUnavailable(
                f"{self.title} is configured but its library ({', '.join(missing)}) is not "
                f"installed: pip install 'chatgate[{self.extra or self.name}]'"
            )

    def create(self, settings: BaseModel, ctx: AdapterContext) -> Adapter:
        """The adapter for these settings; raises PlatformUnavailable without its SDK."""
        self.ensure_installed()
        return self.build(self.section(settings), ctx)
