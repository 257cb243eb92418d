"""Telegram adapter: python-telegram-bot inside the gateway (DMs, groups, topics, buttons)."""

from adapters.telegram.adapter import TelegramAdapter, TelegramStartError
from adapters.telegram.files import AttachmentTooLarge, AttachmentUnavailable

__all__ = ["AttachmentTooLarge", "AttachmentUnavailable", "TelegramAdapter", "TelegramStartError"]
