"""Stopping background tasks reliably.

A task can swallow one cancellation: redis-py turns a cancel that lands while it
opens a connection into a timeout it then retries. `stop_task` keeps cancelling
until the task really ends (or gives up after a bound), so shutdown never hangs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


async def stop_task(task: asyncio.Task[Any] | None, *, grace: float = 5.0) -> None:
    if task is None or task.done():
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while not task.done():
        task.cancel()
        remaining = deadline - loop.time()
        if remaining <= 0:
            log.warning("task did not stop task=%s", task.get_name())
            return
        await asyncio.wait({task}, timeout=min(0.5, remaining))
    if not task.cancelled() and task.exception() is not None:
        log.debug("task ended with error task=%s", task.get_name(), exc_info=task.exception())


async def stop_tasks(tasks: list[asyncio.Task[Any]], *, grace: float = 5.0) -> None:
    await asyncio.gather(*(stop_task(t, grace=grace) for t in tasks))
