"""One object that records what turns, LLM calls and tool calls did: Prometheus metrics
always (gateway/runtime/metrics.py), and OpenTelemetry spans when a tracer is configured
(gateway/runtime/otel.py). Spans nest through the context: a turn's span is the parent of the LLM
and tool spans inside it, tool calls running in parallel included.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from gateway.runtime.metrics import Metrics
from gateway.sdk.channels import DeliveryError, Outbox
from gateway.sdk.messages import Outbound, SentRef

AttributeValue = str | int | float | bool


class SpanRecorder:
    """The current span, or nothing when tracing is off; safe to call either way."""

    def __init__(self, span: Any | None = None) -> None:
        self._span = span

    def set(self, key: str, value: AttributeValue) -> None:
        if self._span is not None:
            self._span.set_attribute(key, value)

    def fail(self, kind: str, detail: str = "") -> None:
        """Mark the span as failed (an outcome, not an exception that escaped)."""
        if self._span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", kind)
        self._span.set_status(Status(StatusCode.ERROR, detail or kind))


_NO_SPAN = SpanRecorder()


class Telemetry:
    def __init__(self, metrics: Metrics, tracer: Any | None = None) -> None:
        self.metrics = metrics
        self._tracer = tracer

    @property
    def tracing(self) -> bool:
        return self._tracer is not None

    @contextlib.contextmanager
    def span(self, name: str, **attributes: AttributeValue) -> Iterator[SpanRecorder]:
        if self._tracer is None:
            yield _NO_SPAN
            return
        with self._tracer.start_as_current_span(name, attributes=attributes) as span:
            yield SpanRecorder(span)

    # -- what the parts report -------------------------------------------------------------

    def llm_call(
        self,
        provider: str,
        model: str,
        seconds: float,
        *,
        error: str | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost: float = 0.0,
    ) -> None:
        m = self.metrics
        outcome = "ok" if error is None else "error"
        m.observe("llm_request_seconds", seconds, provider=provider, model=model, outcome=outcome)
        if error is not None:
            m.inc("llm_errors_total", provider=provider, model=model, kind=error)
            return
        m.inc("llm_tokens_total", prompt_tokens, provider=provider, model=model, kind="prompt")
        m.inc(
            "llm_tokens_total", completion_tokens, provider=provider, model=model, kind="completion"
        )
        m.inc("llm_cost_usd_total", cost, provider=provider, model=model)

    def fallback(self, from_model: str, to_model: str, reason: str) -> None:
        self.metrics.inc(
            "llm_fallbacks_total", from_model=from_model, to_model=to_model, reason=reason
        )

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        self.metrics.inc("tool_calls_total", tool=tool, outcome=outcome)
        self.metrics.observe("tool_seconds", seconds, tool=tool)

    def turn(self, profile: str, status: str, seconds: float, iterations: int | None) -> None:
        self.metrics.inc("turns_total", status=status, profile=profile)
        self.metrics.observe("turn_seconds", seconds, profile=profile)
        if iterations is not None:
            self.metrics.observe("turn_iterations", iterations, profile=profile)


class MeteredOutbox(Outbox):
    """The outbox, counting each send by platform and outcome."""

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()
        self._metrics = metrics

    async def send(self, out: Outbound) -> SentRef:
        platform = out.chat.platform
        try:
            sent = await super().send(out)
        except DeliveryError as exc:
            outcome = "refused" if exc.permanent else "failed"
            self._metrics.inc("platform_sends_total", platform=platform, outcome=outcome)
            raise
        except Exception:
            self._metrics.inc("platform_sends_total", platform=platform, outcome="error")
            raise
        self._metrics.inc("platform_sends_total", platform=platform, outcome="ok")
        return sent
