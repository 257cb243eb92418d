"""The Matrix platform as the gateway sees it: settings, when it runs, how it is built."""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.matrix.settings import MatrixSettings
from gateway.sdk import Adapter, AdapterContext, CheckResult, PlatformPlugin

if TYPE_CHECKING:
    import httpx


def _build(settings: MatrixSettings, ctx: AdapterContext) -> Adapter:
    from adapters.matrix.adapter import MatrixAdapter

    return MatrixAdapter(settings, ctx)


async def _check(settings: MatrixSettings, http: httpx.AsyncClient) -> CheckResult:
    from adapters.matrix.doctor import check

    return await check(settings, http)


PLUGIN = PlatformPlugin(
    name="matrix",
    title="Matrix",
    settings=MatrixSettings,
    enabled=lambda s: s.configured,
    build=_build,
    check=_check,
    requires=("nio", "vodozemac", "markdown_it"),
    extra="matrix",
    how_to_enable=(
        "CHATGATE_MATRIX__HOMESERVER and CHATGATE_MATRIX__USER_ID with "
        "CHATGATE_MATRIX__ACCESS_TOKEN (or CHATGATE_MATRIX__PASSWORD)"
    ),
)
