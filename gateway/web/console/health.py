"""The LLM server's health for the console: probed in the background at most once a minute
(the doctor's check: the model list, or a one-token completion), never while a page waits."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from gateway.config import LLMSettings
from gateway.llm.client import LLMClient
from gateway.llm.errors import LLMError

EVERY = 60.0
TIMEOUT = 15.0


@dataclass(frozen=True)
class Health:
    ok: bool | None  # None: not checked yet
    detail: str
    checked: float = 0.0


class LLMHealth:
    def __init__(self, settings: LLMSettings) -> None:
        self._client = LLMClient(settings.model_copy(update={"max_retries": 0}))
        self._last = Health(None, "checking…")
        self._task: asyncio.Task[None] | None = None
        self.base_url = settings.base_url
        self.model = settings.model

    def snapshot(self) -> Health:
        """The last result; starts a new probe when it is older than a minute."""
        stale = time.time() - self._last.checked >= EVERY
        if stale and (self._task is None or self._task.done()):
            self._task = asyncio.create_task(self._probe(), name="console llm probe")
        return self._last

    async def _probe(self) -> None:
        try:
            detail = await asyncio.wait_for(self._client.check(), TIMEOUT)
            self._last = Health(True, detail, time.time())
        except LLMError as exc:
            self._last = Health(False, exc.user_message, time.time())
        except TimeoutError:
            self._last = Health(False, f"no answer within {TIMEOUT:.0f} s", time.time())
        except Exception as exc:
            self._last = Health(False, f"{type(exc).__name__}", time.time())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._client.aclose()
