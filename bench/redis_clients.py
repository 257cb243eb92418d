"""Redis clients under many callers at once: CPU per command and commands a second.

Prints a table; not a test. 256 callers each SET and GET their own key 200 times on a private
redis-server, on uvloop, through: the store's client (redis-py pipelines, one per pass of the
event loop, gateway/store/redis_client.py), redis-py sending each command on its own from its
pool, and valkey-glide (when installed: `pip install valkey-glide`). The CPU column is this
process's (glide's Rust threads included).

    .venv/bin/python bench/redis_clients.py [--callers 256] [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import resource
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.store.redis_client import RedisCommands  # noqa: E402
from gateway.store.redis_topology import RedisTarget, open_client  # noqa: E402
from tests.fixtures_redis import RedisServer  # noqa: E402

Call = Callable[..., Awaitable[Any]]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def batched(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    client = open_client(
        RedisTarget(url=url),
        max_connections=16,
        socket_timeout=5,
        retries=3,
        per_reply_timeout=False,
    )
    commands = RedisCommands(client, batches=4, deadline=20)
    return commands.call, commands.close


async def one_by_one(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    # As many connections as callers: a smaller pool makes callers wait for a connection.
    client = open_client(RedisTarget(url=url), max_connections=256, socket_timeout=5, retries=3)
    return client.execute_command, client.aclose


async def glide_client(url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    from glide import GlideClient, GlideClientConfiguration, NodeAddress

    port = int(url.rsplit(":", 1)[1].split("/")[0])
    client = await GlideClient.create(
        GlideClientConfiguration([NodeAddress("127.0.0.1", port)], request_timeout=5000)
    )

    async def call(*command: Any) -> Any:
        return await client.custom_command([str(part) for part in command])

    return call, client.close


async def measure(
    name: str, make: Callable[[str], Awaitable[Any]], url: str, callers: int, rounds: int
) -> tuple[str, float, float]:
    call, close = await make(url)
    await call("PING")

    async def caller(n: int) -> None:
        for _ in range(rounds):
            await call("SET", f"bench:{n}", "x" * 100)
            await call("GET", f"bench:{n}")

    cpu, started = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(caller(n) for n in range(callers)))
    cpu, wall = cpu_seconds() - cpu, time.perf_counter() - started
    await close()
    commands = callers * rounds * 2
    return name, cpu / commands * 1e6, commands / wall


async def main(callers: int, rounds: int) -> None:
    clients: list[tuple[str, Callable[[str], Awaitable[Any]]]] = [
        ("redis-py, pipelines per loop pass (the store's)", batched),
        ("redis-py, one command at a time from its pool", one_by_one),
    ]
    if importlib.util.find_spec("glide") is not None:
        clients.append(("valkey-glide", glide_client))
    else:
        print("valkey-glide is not installed: its row is left out", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        server.start()
        try:
            rows = [await measure(n, m, server.url, callers, rounds) for n, m in clients]
        finally:
            server.stop()
    print(f"| client ({callers} callers at once) | CPU µs per command | commands/s |")
    print("|---|---|---|")
    for name, cpu_us, rate in rows:
        print(f"| {name} | {cpu_us:.1f} | {rate:,.0f} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    uvloop.run(main(args.callers, args.rounds))
