"""Cross-process rendezvous: a turn waits for an answer that may arrive in another replica.

An approval or a clarifying question is asked by the process running the turn,
but the button press can land on any replica (Slack and Telegram webhooks are
spread over all of them). The answer is written once (first writer wins, atomic
in the store) and announced on a channel; the waiter also polls the key, so a
lost notification only delays the answer, never loses it.

Answers are sealed (gateway/approvals/seals.py) and written under a name derived from the key, so
a command that can write the store can neither forge an answer nor take an answer's place
before a person gives it; an answer that does not verify is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from gateway.approvals.seals import EntrySigner
from gateway.runtime.tasks import stop_task
from gateway.store import keys
from gateway.store.base import Store, StoreUnavailable

log = logging.getLogger(__name__)

_POLL_SECONDS = 2.0


class Rendezvous:
    def __init__(
        self,
        store: Store,
        namespace: str,
        signer: EntrySigner,
        *,
        answer_ttl: float = 7 * 24 * 3600,
    ) -> None:
        self._store = store
        self._ns = namespace
        self._signer = signer
        self._ttl = answer_ttl
        self._waiters: dict[str, asyncio.Future[str]] = {}
        self._listener: asyncio.Task[None] | None = None

    def _key(self, item_id: str) -> str:
        return keys.rendezvous_answer(self._ns, self._signer.tag(self._ns, item_id))

    @property
    def _kind(self) -> str:
        return f"{self._ns} answer"

    @property
    def _channel(self) -> str:
        return keys.rendezvous_channel(self._ns)

    async def answer(self, item_id: str, value: str) -> bool:
        """Record the answer; False when someone answered first (their answer stands)."""
        key = self._key(item_id)
        sealed = self._signer.seal(self._kind, key, value)
        first = await self._store.set(key, sealed, ttl=self._ttl, only_if_absent=True)
        if first:
            self._wake(item_id, value)
            try:
                await self._store.publish(self._channel, item_id)
            except StoreUnavailable:
                log.warning("answer announced late rendezvous=%s id=%s", self._ns, item_id)
        return first

    async def current(self, item_id: str) -> str | None:
        """The answer, when there is one that verifies."""
        key = self._key(item_id)
        value = self._signer.open(self._kind, key, await self._store.get(key))
        if value is None or isinstance(value, str):
            return value
        self._signer.report(self._kind, key)
        return None

    async def wait(self, item_id: str, timeout: float) -> str | None:  # noqa: ASYNC109
        """The answer, or None when the timeout passes first."""
        self._ensure_listener()
        loop = asyncio.get_running_loop()
        future = self._waiters.setdefault(item_id, loop.create_future())
        deadline = time.monotonic() + timeout
        try:
            while True:
                existing = await self._safe_current(item_id)
                if existing is not None:
                    return existing
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                with contextlib.suppress(TimeoutError):
                    return await asyncio.wait_for(
                        asyncio.shield(future), timeout=min(remaining, _POLL_SECONDS)
                    )
        finally:
            self._waiters.pop(item_id, None)

    async def _safe_current(self, item_id: str) -> str | None:
        try:
            return await self.current(item_id)
        except StoreUnavailable:
            return None

    def _wake(self, item_id: str, value: str) -> None:
        future = self._waiters.get(item_id)
        if future is not None and not future.done():
            future.set_result(value)

    def _ensure_listener(self) -> None:
        if self._store.shared and (self._listener is None or self._listener.done()):
            self._listener = asyncio.create_task(self._listen(), name=f"rendezvous {self._ns}")

    async def _listen(self) -> None:
        async for item_id in self._store.listen(self._channel):
            if item_id in self._waiters:
                value = await self._safe_current(item_id)
                if value is not None:
                    self._wake(item_id, value)

    async def close(self) -> None:
        await stop_task(self._listener)
