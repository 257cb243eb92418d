"""Which turns stream their reply, and how: builds each turn's ReplyStream from the settings
(`[streaming]`, `llm.stream`, `llm.tool_call_format`) and what the chat's platform supports."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from gateway.config import ProviderSettings, Settings
from gateway.runtime.secrets import secret_values
from gateway.sdk.channels import Outbox
from gateway.sdk.messages import Inbound
from gateway.sdk.tooling import ToolSpec, TypingControl
from gateway.streaming.holdback import CallHoldback
from gateway.streaming.progress import SecretScrubber
from gateway.streaming.protocol import StreamingAdapter
from gateway.streaming.reply import ReplyStream, StreamPolicy


class ReplyStreams:
    """Builds each turn's ReplyStream from the settings; None where replies arrive whole."""

    def __init__(self, settings: Settings, outbox: Outbox) -> None:
        self._settings = settings
        self._outbox = outbox
        self._scrub = SecretScrubber(secret_values(settings))

    def open(
        self,
        inbound: Inbound,
        tools: Sequence[ToolSpec[Any]],
        typing: TypingControl,
        llm: ProviderSettings | None = None,
        gate: Callable[[], Awaitable[bool]] | None = None,
    ) -> ReplyStream | None:
        """The turn's reply stream, or None; `llm` is the turn's model's settings (its
        profile's), when not `[llm]`."""
        settings = self._settings
        llm = llm or settings.llm
        platform = inbound.chat.platform
        if not llm.stream or not self._outbox.has(platform):
            return None
        adapter = self._outbox.adapter(platform)
        support = adapter.capabilities.streaming
        enabled, interval = settings.streaming.for_platform(platform)
        if support is None or not enabled:
            return None
        if not support.edits and not isinstance(adapter, StreamingAdapter):
            return None
        policy = StreamPolicy(
            interval=interval or support.interval,
            first_delay=settings.streaming.first_delay_ms / 1000,
            progress=settings.streaming.progress,
            show_reasoning=settings.streaming.show_reasoning,
        )
        holdback = None
        if tools and llm.tool_call_format != "native":
            holdback = CallHoldback([spec.name for spec in tools])
        return ReplyStream(
            adapter,
            support,
            inbound,
            policy,
            tools={spec.name: spec for spec in tools},
            scrub=self._scrub,
            typing=typing,
            holdback=holdback,
            gate=gate,
        )
