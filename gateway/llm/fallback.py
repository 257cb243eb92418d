"""A turn's models in order, behind the one `complete` the agent loop calls.

When a model fails in a way retrying will not fix soon (the client already retried 5xx,
timeouts and short 429s; auth and missing-model errors are not retried), the call goes to
the next model of the chain with the messages as they are, and the turn stays there. The
person is told once per turn (`on_switch`). Circuit breakers keep a failing provider out
of later turns for a while. Each call's usage and cost is kept per model for the budgets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.config import ProviderSettings
from gateway.llm.breaker import CircuitBreakers
from gateway.llm.errors import LLMError, LLMRateLimited
from gateway.llm.providers import ModelTarget, ProviderPool
from gateway.llm.types import Completion, Message, OnText, Usage
from gateway.llm.vision import Vision
from gateway.runtime.telemetry import AttributeValue, SpanRecorder, Telemetry

log = logging.getLogger(__name__)

_REASONS = {
    "server_error": "server error",
    "unavailable": "unreachable",
    "unreachable": "unreachable",
    "timeout": "timed out",
    "rate_limited": "rate limited",
    "auth": "credentials refused",
    "model_missing": "model not found",
    "no_endpoint": "no chat endpoint",
    "held_out": "failing recently",
}
# Keyed per model rather than per provider: the rest of the provider may still work.
_MODEL_LEVEL = {"model_missing", "no_endpoint"}


@dataclass(frozen=True)
class Switch:
    """The turn moved from one model to the next of its chain."""

    failed: ModelTarget
    to: ModelTarget
    reason: str  # an error kind, or "held_out" when a breaker kept the model out

    def note(self) -> str:
        why = _REASONS.get(self.reason, self.reason.replace("_", " "))
        return f"Note: {self.failed} is not available ({why}); {self.to} is answering instead."


OnSwitch = Callable[[Switch], Awaitable[None]]


class ModelRoute:
    """Implements `gateway.llm.types.Completer` over a chain of models; one per turn."""

    def __init__(
        self,
        pool: ProviderPool,
        breakers: CircuitBreakers,
        chain: Sequence[ModelTarget],
        *,
        telemetry: Telemetry | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stream: bool | None = None,
        on_switch: OnSwitch | None = None,
    ) -> None:
        if not chain:
            raise ValueError("a route needs at least one model")
        self._pool = pool
        self._breakers = breakers
        self.chain = tuple(dict.fromkeys(chain))  # each model once, first place kept
        self._telemetry = telemetry
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._stream = stream
        self._on_switch = on_switch
        self._position = 0
        self._switched = False
        self.usage: dict[ModelTarget, Usage] = {}
        self.estimated = False  # some usage was estimated: the server reported none

    def fresh(self) -> ModelRoute:
        """The same models and settings with nothing used yet: for work that goes on after
        the turn (a background task), whose usage is settled on its own."""
        return ModelRoute(
            self._pool,
            self._breakers,
            self.chain,
            telemetry=self._telemetry,
            temperature=self._temperature,
            max_tokens=self._max_tokens,
            stream=self._stream,
            on_switch=self._on_switch,
        )

    @property
    def current(self) -> ModelTarget:
        return self.chain[self._position]

    def first_settings(self, stream: bool | None = None) -> ProviderSettings:
        """The first model's settings; `stream` overrides its own when given."""
        settings = self._pool.info(self.chain[0]).settings
        if stream is None or stream == settings.stream:
            return settings
        return settings.model_copy(update={"stream": stream})

    @property
    def vision(self) -> Vision:
        """The first model's image handling, which the turn prepares its input for."""
        return self._pool.client(self.chain[0]).vision

    @property
    def switched(self) -> bool:
        return self._switched

    def cost(self) -> float:
        return sum(self._pool.info(t).cost(u) for t, u in self.usage.items())

    @property
    def total(self) -> Usage:
        return sum(self.usage.values(), Usage())

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        stream: bool | None = None,
        max_tokens: int | None = None,
        on_text: OnText | None = None,
        on_reasoning: OnText | None = None,
        temperature: float | None = None,
    ) -> Completion:
        start = self._position
        last_error: LLMError | None = None
        # First the models no breaker holds out; when every one is held out, all of them in
        # order anyway: trying beats refusing.
        for forced in (False, True):
            for index in range(start, len(self.chain)):
                target = self.chain[index]
                if not forced and not self._allows(target):
                    continue
                try:
                    completion = await self._call(
                        target,
                        messages,
                        tools=tools,
                        tool_choice=tool_choice,
                        stream=self._stream if stream is None else stream,
                        max_tokens=max_tokens or self._max_tokens,
                        on_text=on_text,
                        on_reasoning=on_reasoning,
                        temperature=self._temperature if temperature is None else temperature,
                    )
                except LLMError as exc:
                    if not exc.switch_model:
                        raise
                    self._hold_out(target, exc)
                    last_error = exc
                    continue
                self._breakers.succeeded(target.provider)
                self._breakers.succeeded(str(target))
                if index != start:
                    self._position = index
                    reason = last_error.kind if last_error is not None else "held_out"
                    await self._announce(Switch(self.chain[start], target, reason))
                return completion
            if last_error is not None:
                raise last_error
        raise AssertionError("unreachable: the forced pass tries at least one model")

    # -- one model -------------------------------------------------------------------------

    async def _call(
        self,
        target: ModelTarget,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None,
        tool_choice: str | dict[str, Any] | None,
        stream: bool | None,
        max_tokens: int | None,
        on_text: OnText | None,
        on_reasoning: OnText | None,
        temperature: float | None,
    ) -> Completion:
        info = self._pool.info(target)
        client = self._pool.client(target)
        telemetry = self._telemetry
        started = time.monotonic()
        span_attrs: dict[str, AttributeValue] = {
            "llm.provider": target.provider,
            "llm.model": target.model,
        }
        with _span(telemetry, span_attrs) as span:
            try:
                completion = await client.complete(  # images: as this model's llm.vision says
                    messages,
                    tools=tools,
                    tool_choice=tool_choice,
                    stream=stream,
                    max_tokens=max_tokens,
                    on_text=on_text,
                    on_reasoning=on_reasoning,
                    temperature=temperature,
                )
            except LLMError as exc:
                if telemetry is not None:
                    telemetry.llm_call(
                        target.provider, target.model, time.monotonic() - started, error=exc.kind
                    )
                    span.fail(exc.kind, exc.detail)
                raise
            usage = completion.usage
            if usage.total_tokens == 0:
                usage = estimate_usage(messages, tools, completion)
                completion = dataclasses.replace(completion, usage=usage)
                self.estimated = True
            self.usage[target] = self.usage.get(target, Usage()) + usage
            cost = info.cost(usage)
            if telemetry is not None:
                telemetry.llm_call(
                    target.provider,
                    target.model,
                    time.monotonic() - started,
                    prompt_tokens=usage.prompt_tokens,
                    completion_tokens=usage.completion_tokens,
                    cost=cost,
                )
                span.set("llm.prompt_tokens", usage.prompt_tokens)
                span.set("llm.completion_tokens", usage.completion_tokens)
                span.set("llm.cost_usd", cost)
        return completion

    # -- breakers and the note -------------------------------------------------------------

    def _allows(self, target: ModelTarget) -> bool:
        return self._breakers.allows(str(target)) and self._breakers.allows(target.provider)

    def _hold_out(self, target: ModelTarget, exc: LLMError) -> None:
        key = str(target) if exc.kind in _MODEL_LEVEL else target.provider
        wait = exc.retry_after if isinstance(exc, LLMRateLimited) else None
        opened = self._breakers.failed(key, at_least=wait)
        log.warning(
            "llm model failed model=%s kind=%s held_out=%s detail=%s",
            target,
            exc.kind,
            opened,
            exc.detail,
        )

    async def _announce(self, switch: Switch) -> None:
        if self._telemetry is not None:
            self._telemetry.fallback(str(switch.failed), str(switch.to), switch.reason)
        log.info("llm fallback from=%s to=%s reason=%s", switch.failed, switch.to, switch.reason)
        if self._switched:
            return
        self._switched = True  # one note per turn, however often it moves on
        if self._on_switch is not None:
            try:
                await self._on_switch(switch)
            except Exception:  # the note is a courtesy; the answer matters more
                log.exception("fallback note failed")


def _span(telemetry: Telemetry | None, attrs: dict[str, AttributeValue]) -> Any:
    if telemetry is None:
        return contextlib.nullcontext(SpanRecorder())
    return telemetry.span("llm.call", **attrs)


def estimate_usage(
    messages: list[Message], tools: list[dict[str, Any]] | None, completion: Completion
) -> Usage:
    """About four characters a token, for servers that report no usage."""
    prompt_chars = sum(len(json.dumps(m.get("content"), ensure_ascii=False)) for m in messages)
    if tools:
        prompt_chars += len(json.dumps(tools, ensure_ascii=False))
    out_chars = len(completion.content or "") + len(completion.reasoning or "")
    out_chars += sum(len(c.name) + len(c.arguments) for c in completion.tool_calls)
    return Usage(max(1, -(-prompt_chars // 4)), max(1, -(-out_chars // 4)))
