"""LLM client benchmark: the client's own CPU per completion call, plain and streamed.

Prints a table; not a test. The model is tests/fakes/llm.py in its own process, so the
CPU measured (this process's user + system time) is the client's alone: encoding the
request, the HTTP round trip on this side, and reading the answer.

    .venv/bin/python bench/llm_client.py [--calls 5000] [--at-once 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.config import ProviderSettings  # noqa: E402
from gateway.llm.client import LLMClient  # noqa: E402


async def start_model() -> tuple[str, asyncio.subprocess.Process]:
    model = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.llm", cwd=ROOT, stdout=asyncio.subprocess.PIPE
    )
    assert model.stdout is not None
    return (await model.stdout.readline()).decode().strip(), model


async def cpu_per_call(client: LLMClient, calls: int, at_once: int, stream: bool) -> float:
    """Microseconds of this process's CPU per call, `at_once` calls in flight."""
    room = asyncio.Semaphore(at_once)
    messages = [{"role": "user", "content": "How far is the moon?"}]

    async def one() -> None:
        async with room:
            reply = await client.complete(messages, stream=stream)
            assert reply.content.startswith("echo: ")

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (time.process_time() - started) / calls * 1e6


async def main(args: argparse.Namespace) -> None:
    url, model = await start_model()
    settings = ProviderSettings(base_url=url, model="fake-model", max_connections=args.at_once)
    figures: dict[bool, list[float]] = {False: [], True: []}
    try:
        async with LLMClient(settings) as client:
            await cpu_per_call(client, 200, args.at_once, stream=False)  # warm the pool
            for _ in range(args.rounds):
                for stream in (False, True):
                    figures[stream].append(
                        await cpu_per_call(client, args.calls, args.at_once, stream)
                    )
    finally:
        model.terminate()
        await model.wait()
    print(f"{args.calls} calls, {args.at_once} at once, {args.rounds} rounds")
    print(f"{'call':10}  {'CPU per call (us), each round':32}  median")
    for stream, values in figures.items():
        each = ", ".join(f"{v:.0f}" for v in values)
        print(f"{'streamed' if stream else 'plain':10}  {each:32}  {statistics.median(values):.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--at-once", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args()))
