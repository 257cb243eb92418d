"""Optional OpenTelemetry traces: with `otel.endpoint` set and the `otel` extra installed, a
span per turn with child spans per LLM call and tool call, exported over OTLP/HTTP.

Without the package nothing breaks: one warning at start, and metrics work as always.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from gateway.config import OtelSettings

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'chatgate[otel]'"


class Tracing:
    """The tracer spans come from, and the provider to flush at shutdown.

    Built from settings it exports nothing until `start()`: the exporter's thread and its
    HTTP session belong to a running gateway, not to one being built.
    """

    def __init__(
        self, provider: Any | None, *, owned: bool, export_to: OtelSettings | None = None
    ) -> None:
        self._provider = provider
        self._owned = owned  # built here from settings, so shut down here too
        self._export_to = export_to
        self.tracer = provider.get_tracer("chatgate") if provider is not None else None

    @classmethod
    def from_settings(cls, settings: OtelSettings) -> Tracing:
        return cls(_provider(settings), owned=True, export_to=settings)

    def start(self) -> None:
        """Export the spans over OTLP/HTTP from now on (a background thread batches them)."""
        settings, self._export_to = self._export_to, None
        if self._provider is None or settings is None:
            return
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        exporter = OTLPSpanExporter(endpoint=settings.endpoint, headers=dict(settings.headers))
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        log.info("tracing to %s", settings.endpoint)

    async def shutdown(self) -> None:
        if self._provider is not None and self._owned:
            try:
                # Flushes the spans still queued: a blocking HTTP export, so not on the loop.
                await asyncio.to_thread(self._provider.shutdown)
            except Exception:
                log.exception("tracing shutdown failed")


def _provider(settings: OtelSettings) -> Any | None:
    if not settings.endpoint:
        return None
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        log.warning(
            "otel.endpoint is set but OpenTelemetry is not installed (%s); traces are off",
            INSTALL_HINT,
        )
        return None
    return TracerProvider(resource=Resource.create({"service.name": settings.service_name}))
