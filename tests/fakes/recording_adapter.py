"""A platform adapter that records what the gateway sends (optionally to a JSON-lines file, for
tests that run gateways in subprocesses) and can be told to fail."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections import deque
from pathlib import Path

from gateway.sdk.channels import Capabilities, DeliveryError
from gateway.sdk.messages import ChatRef, Outbound, SentRef


class RecordingAdapter:
    capabilities = Capabilities(max_len=4096, threads=True, typing=False, buttons=False)

    def __init__(self, platform: str = "rec", *, log_path: Path | None = None) -> None:
        self.platform = platform
        self.sent: list[Outbound] = []
        self.failures: deque[Exception] = deque()  # raised by the next sends, in order
        self.unreachable: set[str] = set()  # chat ids that fail permanently
        self.attempts = 0
        self._log_path = log_path
        self._ids = itertools.count(1)
        self._changed = asyncio.Condition()

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    async def send(self, out: Outbound) -> SentRef:
        self.attempts += 1
        if out.chat.chat_id in self.unreachable:
            raise DeliveryError("Forbidden: bot was blocked by the user", permanent=True)
        if self.failures:
            raise self.failures.popleft()
        message_id = f"{self.platform}-{os.getpid()}-{next(self._ids)}"
        if self._log_path is not None:
            line = {
                "pid": os.getpid(),
                "at": time.time(),
                "chat": out.chat.chat_id,
                "thread": out.chat.thread_id,
                "text": out.text,
                "message_id": message_id,
            }
            with self._log_path.open("a", encoding="utf-8") as log:
                log.write(json.dumps(line) + "\n")
        async with self._changed:
            self.sent.append(out)
            self._changed.notify_all()
        return SentRef(chat=out.chat, message_id=message_id)

    async def edit(self, ref: SentRef, out: Outbound) -> None:
        return None

    async def typing(self, chat: ChatRef) -> None:
        return None

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [o.text for o in self.sent if chat_id is None or o.chat.chat_id == chat_id]

    async def wait_for(self, count: int, within: float = 10.0) -> list[Outbound]:
        """Wait until at least `count` messages were sent; returns them all."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(lambda: len(self.sent) >= count)
        return self.sent
