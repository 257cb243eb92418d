"""Recent warnings and errors for the console: a logging handler keeps this process's and
shares them through the store (one capped list), so the page shows every replica's."""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import Iterable
from typing import Any

from gateway.runtime.logs import RedactingFilter
from gateway.runtime.tasks import stop_task
from gateway.store import keys
from gateway.store.base import Store

KEEP = 200  # entries kept in the store, across replicas
FLUSH_EVERY = 2.0
MAX_CHARS = 600


class RecentErrors(logging.Handler):
    def __init__(self, store: Store, instance: str, secrets: Iterable[str]) -> None:
        super().__init__(level=logging.WARNING)
        self._store = store
        self._instance = instance
        self._redactor = RedactingFilter(secrets)
        # Handlers may be called from any thread; deque appends are atomic.
        self._waiting: collections.deque[dict[str, Any]] = collections.deque(maxlen=KEEP)
        self._task: asyncio.Task[None] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self._redactor.redact(record.getMessage())
        except Exception:  # a record whose arguments do not format is still worth a line
            text = str(record.msg)
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__})"
        self._waiting.append(
            {
                "ts": record.created,
                "instance": self._instance,
                "level": record.levelname.lower(),
                "logger": record.name,
                "msg": text[:MAX_CHARS],
            }
        )

    def start(self) -> None:
        logging.getLogger().addHandler(self)
        self._task = asyncio.create_task(self._flush_loop(), name="console recent errors")

    async def stop(self) -> None:
        logging.getLogger().removeHandler(self)
        await stop_task(self._task)
        await self._flush()

    async def recent(self, limit: int = 30) -> list[dict[str, Any]]:
        """Newest first, from every replica."""
        await self._flush()
        raw = await self._store.list_range(keys.RECENT_ERRORS, -limit, -1)
        return [json.loads(item) for item in reversed(raw)]

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_EVERY)
            await self._flush()

    async def _flush(self) -> None:
        while self._waiting:
            entry = self._waiting[0]
            try:
                await self._store.push(keys.RECENT_ERRORS, json.dumps(entry), max_len=KEEP)
            except Exception:  # the store is down: keep them for the next try, and say nothing
                return  # (a warning here would feed this handler again)
            if self._waiting and self._waiting[0] is entry:
                self._waiting.popleft()
