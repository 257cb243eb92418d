"""The webhook calls of bench/webhook_burst.py, sent from a process of their own.

Telegram's servers are not on the gateway's machine; the load client here is. Sent from
the bench's own process with aiohttp's client, each call cost the client about half a
millisecond of CPU, and with thousands in flight every call waited for the client to start
all the others before its own request went out (the gateway saw its first call 2.5 s after
a 3,000-call burst began, and answered all of them within 1.2 s of that). So the calls go
from this process, apart from the fake Bot API's, over plain asyncio streams with h11
reading the answers: a call costs tens of microseconds, and what is measured is the
gateway's answer.

Reads one JSON object on stdin (url, secret, connections, timeout, retry_pause, and the
updates as JSON texts with their chat); writes `{"started": t}` as the first call goes out,
one JSON line per update once a call of it is answered 200 (`{"chat", "sent", "ack",
"ack_written", "at"}`: when its first call went out, how long the answered call waited from
its start and from its request's write, and when it was answered),
then the totals (`{"done": true, "timed_out", "refused", "failed", "retried"}`). Times are
on the monotonic clock, which the parent process shares.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import h11

from gateway.runtime.event_loop import event_loop_runner


@dataclass
class Totals:
    timed_out: int = 0
    failed: int = 0  # no connection, or the connection broke
    refused: Counter[int] = field(default_factory=Counter)  # status -> calls
    retried: set[int] = field(default_factory=set)  # chats whose update was sent again


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    path: str
    secret: str

    @classmethod
    def parse(cls, url: str, secret: str) -> Target:
        parts = urlsplit(url)
        return cls(parts.hostname or "127.0.0.1", parts.port or 80, parts.path, secret)

    def request(self, body: bytes) -> bytes:
        """The call's bytes, made once: the burst does not pay for them."""
        client = h11.Connection(h11.CLIENT)
        headers = [
            ("Host", f"{self.host}:{self.port}"),
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("X-Telegram-Bot-Api-Secret-Token", self.secret),
            ("Connection", "close"),
        ]
        return (
            client.send(h11.Request(method="POST", target=self.path, headers=headers))
            + client.send(h11.Data(data=body))
            + client.send(h11.EndOfMessage())
        )


class Call(asyncio.Protocol):
    """One call on a connection of its own: write the request, read the answer's status line.

    Only the status is read (the gateway answers with an empty body): parsing each answer
    with h11 cost 100 µs, a third of the client's time per call."""

    def __init__(self, request: bytes) -> None:
        self._request = request
        self._head = b""
        self._transport: asyncio.Transport | None = None
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.written = 0.0  # when the request went out: the connection is up

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not registered as asyncio.Transport: cast, do not check.
        self._transport = cast(asyncio.Transport, transport)
        self._transport.write(self._request)
        self.written = time.monotonic()

    def data_received(self, data: bytes) -> None:
        self._head += data
        line, found, _ = self._head.partition(b"\r\n")
        if found and not self.status.done():
            version, _, rest = line.partition(b" ")
            code = rest[:3]
            if version.startswith(b"HTTP/1.") and code.isdigit():
                self.status.set_result(int(code))
            else:
                self.status.set_exception(ConnectionError(f"not an HTTP answer: {line!r}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.status.done():
            self.status.set_exception(exc or ConnectionError("closed before an answer"))

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def status_of(target: Target, request: bytes) -> tuple[int, float]:
    """Send one call on a new connection; the status of its answer, and when the request was
    written."""
    loop = asyncio.get_running_loop()
    _, call = await loop.create_connection(lambda: Call(request), target.host, target.port)
    try:
        return await call.status, call.written
    finally:
        call.close()


async def deliver(
    target: Target,
    room: asyncio.Semaphore,
    chat: int,
    request: bytes,
    give_up: float,
    retry_pause: float,
    totals: Totals,
) -> None:
    """Send one update until a call is answered 200, as Telegram does."""
    first_sent = 0.0
    while True:
        async with room:  # a connection of the bot's max_connections
            sent = time.monotonic()
            first_sent = first_sent or sent
            status, written = 0, 0.0
            try:
                async with asyncio.timeout(give_up):
                    status, written = await status_of(target, request)
            except TimeoutError:
                totals.timed_out += 1
                totals.retried.add(chat)
                continue
            except OSError:
                totals.failed += 1
            if status == 200:
                at = time.monotonic()
                answer = {
                    "chat": chat,
                    "sent": first_sent,
                    "ack": at - sent,
                    "ack_written": at - written,
                    "at": at,
                }
                print(json.dumps(answer), flush=False)
                return
        totals.refused[status] += 1
        totals.retried.add(chat)
        await asyncio.sleep(retry_pause)


async def burst(job: dict[str, Any]) -> None:
    target = Target.parse(job["url"], job["secret"])
    requests = [(chat, target.request(body.encode())) for chat, body in job["updates"]]
    room = asyncio.Semaphore(job["connections"])
    totals = Totals()
    print(json.dumps({"started": time.monotonic()}), flush=True)
    await asyncio.gather(
        *(
            deliver(target, room, chat, request, job["timeout"], job["retry_pause"], totals)
            for chat, request in requests
        )
    )
    done = {
        "done": True,
        "timed_out": totals.timed_out,
        "failed": totals.failed,
        "refused": dict(totals.refused),
        "retried": len(totals.retried),
    }
    print(json.dumps(done), flush=True)


def main() -> None:
    job = json.loads(sys.stdin.read())
    event_loop_runner(job.get("loop", "auto"))(burst(job))


if __name__ == "__main__":
    main()
