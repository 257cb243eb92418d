"""Telegram adapter: python-telegram-bot inside the gateway (DMs, groups, topics, buttons).

The gateway finds it through `adapters.telegram.plugin`; importing this package does not
import python-telegram-bot until an adapter class is asked for.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AttachmentTooLarge", "AttachmentUnavailable", "TelegramAdapter", "TelegramStartError"]


def __getattr__(name: str) -> Any:
    if name in ("TelegramAdapter", "TelegramStartError"):
        from adapters.telegram import adapter

        return getattr(adapter, name)
    if name in ("AttachmentTooLarge", "AttachmentUnavailable"):
        from adapters.telegram import files

        return getattr(files, name)
    raise AttributeError(name)
