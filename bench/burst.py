"""Burst: many sessions each send one message at once to one gateway process on Redis.

Prints a table; not a test. Every message is taken (stored, acknowledged) at once; turns then
run at the LLM's pace, at most `router.max_concurrent_turns` at a time, with no lease held
while a message waits. Measured: time until every message is stored, time until every one is
answered, refusals, the process's peak RSS, and the Redis memory each waiting message costs.

    .venv/bin/python bench/burst.py [--sessions 10000] [--llm-delay 0.2] [--turns 256]
        [--llm-capacity 256] [--loop auto|uvloop|asyncio] [--model-process]

"LLM pace floor" is the time the model alone needs: sessions x delay / the requests it
serves at once (its capacity, or the turns, whichever is fewer).

By default the model answers inside this process (an httpx transport), so "CPU per message"
counts the gateway and that stand-in. With --model-process the model is an HTTP server in
its own process (tests/fakes/llm.py) reached through the gateway's real client, as a
deployed model is: the CPU column is then the gateway's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import httpx
import redis as redis_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.admission import Status  # noqa: E402
from gateway.collector import settle_collector  # noqa: E402
from gateway.event_loop import event_loop_runner  # noqa: E402
from tests.fixtures_redis import RedisServer  # noqa: E402
from tests.harness import gateway_settings, running_gateway  # noqa: E402


def cpu_seconds() -> float:
    """This process's CPU time: the gateway's and the in-process model's."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def llm_at_pace(delay: float, capacity: int) -> httpx.AsyncBaseTransport:
    """An OpenAI-compatible model in this process that answers after `delay` seconds, at most
    `capacity` requests at a time (the rest wait their turn, as in a model server's batch)."""
    room = asyncio.Semaphore(capacity)

    class Pace(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            async with room:
                await asyncio.sleep(delay)
            text = json.loads(request.content)["messages"][-1]["content"]
            message = {"role": "assistant", "content": f"re: {text}"}
            return httpx.Response(
                200,
                json={
                    "id": "c",
                    "object": "chat.completion",
                    "model": "m",
                    "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 2},
                },
            )

    return Pace()


async def run(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="chatgate-burst-"))
    (work / "redis").mkdir()
    server = RedisServer(work / "redis")
    server.start()
    info = redis_client.Redis.from_url(server.url)
    baseline = int(info.info("memory")["used_memory"])
    model: asyncio.subprocess.Process | None = None
    capacity = args.llm_capacity or args.turns
    llm_url, transport = "http://llm.invalid/v1", llm_at_pace(args.llm_delay, capacity)
    if args.model_process:
        model = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "tests.fakes.llm", "--delay", str(args.llm_delay)),
            *("--capacity", str(capacity)),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        assert model.stdout is not None
        llm_url, transport = (await model.stdout.readline()).decode().strip(), None
    settings = gateway_settings(
        work,
        llm_url,
        redis_url=server.url,
        redis={"max_connections": args.pool},
        llm={"stream": False},
        router={"max_concurrent_turns": args.turns},
        scheduler={"enabled": False},
    )
    async with running_gateway(settings, llm_transport=transport) as gw:
        settle_collector()  # as `chatgate run` does once started (gateway/collector.py)
        cpu_before = cpu_seconds()
        started = time.monotonic()
        submissions = await asyncio.gather(
            *(gw.submit(f"hello {n}", chat_id=f"c{n}") for n in range(args.sessions))
        )
        stored = time.monotonic() - started
        pending, _ = await gw.app.store.inbox_stats()
        queued_memory = int(info.info("memory")["used_memory"]) - baseline
        refused = sum(s.status not in (Status.STARTED, Status.QUEUED) for s in submissions)
        outcomes = await asyncio.gather(*(s.done for s in submissions))
        drained = time.monotonic() - started
        cpu_per_message = (cpu_seconds() - cpu_before) * 1000 / args.sessions
    server.stop()
    if model is not None:
        model.terminate()
        await model.wait()
    answered = sum(o.ok for o in outcomes)
    per_message = queued_memory / pending if pending else float("nan")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # The model's own bound: its capacity, or the turns that may call it at once.
    pace = args.sessions * args.llm_delay / min(capacity, args.turns)
    print(
        "| sessions | all stored | all answered | LLM pace floor | refused | answered | "
        "CPU per message | peak RSS | Redis per waiting message |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.sessions} | {stored:.1f} s | {drained:.1f} s | {pace:.1f} s | {refused} | "
        f"{answered} | {cpu_per_message:.2f} ms | {peak_mb:.0f} MB | "
        f"{per_message:.0f} B ({pending} waiting) |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--llm-delay", type=float, default=0.2)
    parser.add_argument("--turns", type=int, default=256)
    parser.add_argument(
        "--llm-capacity",
        type=int,
        default=0,
        help="requests the model serves at once (default: --turns); with more turns than "
        "this, turns wait for the model as they would for a busy model server",
    )
    parser.add_argument("--pool", type=int, default=16)
    parser.add_argument(
        "--model-process",
        action="store_true",
        help="the model in its own process, over HTTP (default: inside this process)",
    )
    parser.add_argument(
        "--loop",
        choices=["auto", "uvloop", "asyncio"],
        default="auto",
        help="the event loop, as `event_loop` for chatgate run (default: uvloop where installed)",
    )
    args = parser.parse_args()
    event_loop_runner(args.loop)(run(args))


if __name__ == "__main__":
    main()
