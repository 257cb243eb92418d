"""Structured logging that can never print a configured secret.

Every record passes a redaction filter holding the secret values from Settings
(tokens, API keys, signing secrets, Redis passwords), so even an SDK that logs a
URL with the bot token in it (httpx does, for Telegram) prints `***` instead.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

from gateway.config import Settings
from gateway.runtime.secrets import SecretRedactor, secret_values


class RedactingFilter(logging.Filter):
    """Each record's message and traceback, with the secrets replaced (`SecretRedactor`)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.redact = SecretRedactor(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redact(record.getMessage())
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = self.redact(logging.Formatter().formatException(record.exc_info))
        return True


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = (
            f"{stamp} level={record.levelname.lower()} logger={record.name} {record.getMessage()}"
        )
        if record.exc_text:
            line += "\n" + record.exc_text
        elif record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_text or record.exc_info:
            data["exc"] = record.exc_text or self.formatException(record.exc_info)  # type: ignore[arg-type]
        return json.dumps(data, ensure_ascii=False)


def setup_logging(settings: Settings, *, stream: Any = None) -> RedactingFilter:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else KeyValueFormatter())
    redactor = RedactingFilter(secret_values(settings))
    handler.addFilter(redactor)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    # These log every request URL; the Telegram URL contains the bot token. The MCP SDK
    # (with httpx2) logs every request and its session ids.
    noisy_loggers = ("httpx", "httpcore", "httpx2", "httpcore2", "mcp", "aiohttp.access")
    for noisy in (*noisy_loggers, "apscheduler.executors.default"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return redactor
