"""Core benchmark: submit-to-reply latency through the router, agent loop and store.

Prints a table; not a test. Uses an instant scripted LLM (tests/fakes/llm.py) over real
HTTP on 127.0.0.1, a recording adapter, and a private redis-server for the Redis rows.

    .venv/bin/python bench/core_latency.py
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUN = uuid.uuid4().hex[:8]  # event ids must be new in every run: the router drops repeats
sys.path.insert(0, str(ROOT))

from gateway.app.app import App  # noqa: E402
from gateway.sdk.channels import Capabilities  # noqa: E402
from gateway.sdk.messages import ChatKind, ChatRef, Inbound, Outbound, SentRef, UserRef  # noqa: E402
from tests.fixtures_redis import RedisServer  # noqa: E402
from tests.harness import gateway_settings  # noqa: E402


class TimingAdapter:
    """Records when each reply leaves, keyed by the text it answers; sends nothing."""

    platform = "bench"
    capabilities = Capabilities(max_len=100_000, buttons=False, typing=False)

    def __init__(self) -> None:
        self.sent_at: dict[str, float] = {}

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def send(self, out: Outbound) -> SentRef:
        if not out.text.startswith("echo: "):
            return SentRef(chat=out.chat, message_id="notice")  # queue notices
        self.sent_at[out.text.removeprefix("echo: ")] = time.perf_counter()
        return SentRef(chat=out.chat, message_id=str(len(self.sent_at)))

    async def edit(self, ref: SentRef, out: Outbound) -> None: ...

    async def typing(self, chat: ChatRef) -> None: ...


def inbound(session: int, n: int) -> Inbound:
    chat = ChatRef(platform="bench", chat_id=f"c{session}", kind=ChatKind.DIRECT)
    user = UserRef(platform="bench", user_id=f"u{session}")
    return Inbound(event_id=f"{RUN}-{session}-{n}", chat=chat, sender=user, text=f"m{session}-{n}")


async def run_sessions(settings: Any, sessions: int, per_session: int) -> dict[str, float]:
    """Each session sends its next message when the previous one is answered (as people do);
    all sessions run at once. Latency is submit to reply delivered, per message."""
    app = App(settings)
    adapter = TimingAdapter()
    app.add_adapter(adapter)
    await app.start()
    latencies: list[float] = []

    async def one_session(s: int) -> None:
        for n in range(per_session):
            message = inbound(s, n)
            submitted = time.perf_counter()
            outcome = await (await app.admission.submit(message)).done
            if outcome.reply is None:
                raise RuntimeError(f"message {message.text} was not answered: {outcome}")
            latencies.append((adapter.sent_at[message.text] - submitted) * 1000)

    try:
        started = time.perf_counter()
        await asyncio.wait_for(asyncio.gather(*(one_session(s) for s in range(sessions))), 300)
        elapsed = time.perf_counter() - started
    finally:
        await app.stop()
    latencies.sort()
    return {
        "messages": len(latencies),
        "seconds": elapsed,
        "rate": len(latencies) / elapsed,
        "p50": statistics.median(latencies),
        "p99": latencies[max(int(len(latencies) * 0.99) - 1, 0)],
    }


@contextlib.asynccontextmanager
async def fake_llm(delay: float) -> AsyncIterator[str]:
    """The scripted LLM in its own process, as a real model server would be."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.fakes.llm",
        "--delay",
        str(delay),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    url = (await proc.stdout.readline()).decode().strip()
    try:
        yield url
    finally:
        proc.kill()
        await proc.wait()


async def main() -> None:
    rows: list[tuple[str, dict[str, float]]] = []
    scenarios = [
        ("1000 msgs / 100 sessions", 0.0, 100, 10),
        ("500 sessions x 1 msg, 1 s LLM", 1.0, 500, 1),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        redis_server = RedisServer(Path(tmp))
        redis_server.start()
        try:
            for name, delay, sessions, per_session in scenarios:
                async with fake_llm(delay) as llm_url:
                    for store in ("embedded", "redis"):
                        url = redis_server.url if store == "redis" else ""
                        data = Path(tmp) / f"{store}-{sessions}"
                        settings = gateway_settings(data, llm_url, redis_url=url)
                        result = await run_sessions(settings, sessions, per_session)
                        rows.append((f"{name}, {store}", result))
        finally:
            redis_server.stop()

    print(f"{'scenario':42} {'msgs':>6} {'total s':>8} {'msg/s':>8} {'p50 ms':>8} {'p99 ms':>8}")
    for name, r in rows:
        print(
            f"{name:42} {r['messages']:>6.0f} {r['seconds']:>8.2f} {r['rate']:>8.0f} "
            f"{r['p50']:>8.1f} {r['p99']:>8.1f}"
        )


if __name__ == "__main__":
    asyncio.run(main())
