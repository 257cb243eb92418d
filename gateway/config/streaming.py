"""`[streaming]`: replies shown while the model writes them (gateway/streaming/)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from gateway.config.base import Section


class StreamingOverride(Section):
    """`[streaming.platforms.<name>]`: one platform's exceptions to the streaming defaults."""

    enabled: bool | None = None
    interval_ms: int | None = Field(default=None, ge=100, le=60_000)


class StreamingSettings(Section):
    """Replies shown while the model writes them (gateway/streaming/), when the server streams."""

    enabled: bool = True
    # Least time between two updates of one streamed message; 0: the platform's own default
    # (1000 ms on Telegram, Discord and Matrix, 500 on Slack).
    interval_ms: int = Field(default=0, ge=0, le=60_000)
    # A reply that is over within this long after its first words is sent whole, without a
    # draft or edits first (no flicker and one notification for short, fast answers).
    first_delay_ms: int = Field(default=400, ge=0, le=60_000)
    # Lines shown while tools run: none, one short line per call, or with arguments and results.
    progress: Literal["off", "tools", "verbose"] = "tools"
    show_reasoning: bool = False  # stream the model's reasoning until the answer starts
    platforms: dict[str, StreamingOverride] = {}

    def for_platform(self, platform: str) -> tuple[bool, float | None]:
        """(enabled, interval in seconds or None for the platform's default) for a platform."""
        override = self.platforms.get(platform, StreamingOverride())
        enabled = self.enabled if override.enabled is None else override.enabled
        interval_ms = override.interval_ms or self.interval_ms
        return enabled, (interval_ms / 1000 if interval_ms else None)
