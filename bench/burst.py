"""Burst: many sessions each send one message at once to one gateway process on Redis.

Prints a table; not a test. Every message is taken (stored, acknowledged) at once; turns then
run at the LLM's pace, at most `router.max_concurrent_turns` at a time, with no lease held
while a message waits. Measured: time until every message is stored, time until every one is
answered, refusals, the process's peak RSS, and the Redis memory each waiting message costs.

    .venv/bin/python bench/burst.py [--sessions 10000] [--llm-delay 0.2] [--turns 256]
        [--llm-capacity 256] [--loop auto|uvloop|asyncio] [--model-process] [--replicas 1]
        [--one-intake]
    .venv/bin/python bench/burst.py --webhooks [--store redis|embedded] [--connections 100]
        [--bare-server]

With --webhooks the burst goes as real Telegram webhook calls into a `chatgate run`
subprocess, from a client that retries a call not answered within 10 s as Telegram does
(bench/webhook_burst.py): answered once, duplicated, lost, the acknowledgement's and the
answer's p50/p99, and the calls that timed out.

"LLM pace floor" is the time the model alone needs: as many rounds of `delay` as it takes
to serve every session when it serves N at once (its capacity, or the turns, whichever is
fewer): 10,000 sessions at 256 are 40 rounds, 8.0 s with a 0.2 s model.

By default the model answers inside this process (over HTTP on 127.0.0.1), so "CPU per message"
counts the gateway and that stand-in. With --model-process the model is an HTTP server in
its own process (tests/fakes/llm.py) reached through the gateway's real client, as a
deployed model is: the CPU column is then the gateway's alone.

With --replicas N the burst goes to N gateway processes on the same Redis, each taking
1/N of the messages (as a balancer would spread webhooks) and 1/N of the turns; any replica
runs any session's turn. With --one-intake every message goes to the first replica, as
Telegram's long polling does (only the leader polls), and the others find the waiting
sessions in the store. One process is bound by its CPU once the model answers faster than
it can run turns (a 0.2 s model at 256 turns asks for 1,280 turns a second); replicas are
how a deployment keeps pace with such a model, and this measures whether they do. The CPU
column is then the replicas' summed, and "answered" counts each message's reply once
wherever it was sent (a second reply would show as a duplicate).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import resource
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, NamedTuple

import redis as redis_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import webhook_burst  # noqa: E402
from gateway.intake.admission import Status  # noqa: E402
from gateway.runtime.collector import settle_collector  # noqa: E402
from gateway.runtime.event_loop import event_loop_runner  # noqa: E402
from gateway.sdk.messages import Outbound  # noqa: E402
from tests.fakes.llm import Reply, ScriptedLLM, last_user_text  # noqa: E402
from tests.fixtures_redis import RedisServer  # noqa: E402
from tests.harness import gateway_settings, running_gateway  # noqa: E402


def redis_cpu_seconds(info: redis_client.Redis) -> float:
    """The redis-server's CPU time so far."""
    cpu = info.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def cpu_seconds() -> float:
    """This process's CPU time: the gateway's and the in-process model's."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.asynccontextmanager
async def llm_at_pace(delay: float, capacity: int) -> AsyncIterator[str]:
    """An OpenAI-compatible model in this process that answers after `delay` seconds, at most
    `capacity` requests at a time (the rest wait their turn, as in a model server's batch);
    yields its address."""
    room = asyncio.Semaphore(capacity)

    async def respond(request: dict[str, Any]) -> Reply:
        async with room:
            await asyncio.sleep(delay)
        return Reply(content=f"echo: {last_user_text(request)}")

    async with ScriptedLLM(respond, record=False) as server:
        yield server.url


def settings_for(
    args: argparse.Namespace, work: Path, llm_url: str, redis_url: str, key_prefix: str = ""
) -> Any:
    return gateway_settings(
        work,
        llm_url,
        redis_url=redis_url,
        key_prefix=key_prefix,
        redis={"max_connections": args.pool},
        llm={"stream": False},
        router={"max_concurrent_turns": args.turns // args.replicas},
        scheduler={"enabled": False},
        # Replicas share one approvals key, as a deployment of several must.
        approvals={"secret": f"burst-bench-approvals-{key_prefix}"},
    )


async def start_model(args: argparse.Namespace) -> tuple[str, asyncio.subprocess.Process]:
    """The model as an HTTP server in its own process; its address and the process."""
    model = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fakes.llm", "--delay", str(args.llm_delay)),
        *("--capacity", str(args.llm_capacity or args.turns)),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert model.stdout is not None
    return (await model.stdout.readline()).decode().strip(), model


class Services(NamedTuple):
    work: Path
    redis_url: str
    info: redis_client.Redis  # for redis-server's INFO
    baseline: int  # redis-server's memory before the burst
    llm_url: str  # "" when the model answers inside the gateway's process


@contextlib.asynccontextmanager
async def services(args: argparse.Namespace) -> AsyncIterator[Services]:
    """A private redis-server and, with --model-process, the model in its own process."""
    work = Path(tempfile.mkdtemp(prefix="chatgate-burst-"))
    (work / "redis").mkdir()
    server = RedisServer(work / "redis")
    server.start()
    model: asyncio.subprocess.Process | None = None
    try:
        info = redis_client.Redis.from_url(server.url)
        baseline = int(info.info("memory")["used_memory"])
        llm_url = ""
        if args.model_process:
            llm_url, model = await start_model(args)
        yield Services(work, server.url, info, baseline, llm_url)
    finally:
        server.stop()
        if model is not None:
            model.terminate()
            await model.wait()


async def run(args: argparse.Namespace) -> None:
    async with services(args) as env:
        await run_in_process(args, env)


async def run_in_process(args: argparse.Namespace, env: Services) -> None:
    work, redis_url, llm_url = env.work, env.redis_url, env.llm_url
    async with contextlib.AsyncExitStack() as model:
        if not llm_url:
            capacity = args.llm_capacity or args.turns
            llm_url = await model.enter_async_context(llm_at_pace(args.llm_delay, capacity))
        await run_gateway(args, env, settings_for(args, work, llm_url, redis_url))


async def run_gateway(args: argparse.Namespace, env: Services, settings: Any) -> None:
    info, baseline = env.info, env.baseline
    async with running_gateway(settings) as gw:
        settle_collector()  # as `chatgate run` does once started (gateway/runtime/collector.py)
        cpu_before, redis_before = cpu_seconds(), redis_cpu_seconds(info)
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
        redis_per_message = (redis_cpu_seconds(info) - redis_before) * 1000 / args.sessions
        replies = Counter(out.chat.chat_id for out in gw.console.sent if is_answer(out))
    print_table(
        args,
        Result(
            stored=stored,
            drained=drained,
            refused=refused,
            answered=sum(o.ok for o in outcomes),
            duplicated=sum(n - 1 for n in replies.values()),
            cpu_per_message=cpu_per_message,
            redis_cpu_per_message=redis_per_message,
            peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            queued_memory=queued_memory,
            pending=pending,
        ),
    )


async def run_replicas(args: argparse.Namespace) -> None:
    """The burst spread over `args.replicas` gateway processes on one Redis (see the module
    docstring). Each replica is this script with --replica-index; they talk in JSON lines."""
    async with services(args) as env:
        await run_spread(args, env)


async def run_spread(args: argparse.Namespace, env: Services) -> None:
    work, redis_url, info, baseline, llm_url = env
    prefix = f"burst{uuid.uuid4().hex[:8]}"
    replicas = [
        await asyncio.create_subprocess_exec(
            *(sys.executable, __file__, "--replica-index", str(index), "--redis-url", redis_url),
            *("--key-prefix", prefix, "--llm-url", llm_url, "--work", str(work)),
            *forwarded(args),
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=1 << 24,  # the last report lists every session the replica answered
        )
        for index in range(args.replicas)
    ]
    for replica in replicas:
        assert (await read_line(replica))["ready"]
    redis_before = redis_cpu_seconds(info)
    started = time.monotonic()
    for replica in replicas:
        tell(replica, "go")
    stored_at: list[float] = []
    refused = waiting = queued_memory = 0
    answered = [0] * len(replicas)
    drained = 0.0

    async def follow(index: int, replica: asyncio.subprocess.Process) -> None:
        nonlocal refused, waiting, queued_memory, drained
        while True:
            line = await read_line(replica)
            if "stored" in line:
                stored_at.append(time.monotonic() - started)
                refused += line["refused"]
                if len(stored_at) == len(replicas):  # the whole burst is in the store
                    queued_memory = int(info.info("memory")["used_memory"]) - baseline
                    waiting = line["waiting"]
            elif "answered" in line:
                answered[index] = line["answered"]
                if sum(answered) >= args.sessions - refused:
                    drained = time.monotonic() - started
                    return

    followers = [asyncio.create_task(follow(i, r)) for i, r in enumerate(replicas)]
    await asyncio.wait(followers, return_when=asyncio.FIRST_COMPLETED)
    for task in followers:
        task.cancel()
    await asyncio.gather(*followers, return_exceptions=True)  # their reads end before ours
    redis_cpu = redis_cpu_seconds(info) - redis_before
    for replica in replicas:
        tell(replica, "stop")
    sessions: Counter[str] = Counter()
    cpu = peak_mb = 0.0
    for replica in replicas:
        report = await read_line(replica)
        sessions.update(report["sessions"])
        cpu += report["cpu"]
        peak_mb = max(peak_mb, report["peak_mb"])
        await replica.wait()
    print_table(
        args,
        Result(
            stored=max(stored_at),
            drained=drained,
            refused=refused,
            answered=len(sessions),
            duplicated=sum(n - 1 for n in sessions.values()),
            cpu_per_message=cpu * 1000 / args.sessions,
            redis_cpu_per_message=redis_cpu * 1000 / args.sessions,
            peak_mb=peak_mb,
            queued_memory=queued_memory,
            pending=waiting,
        ),
    )


async def replica(args: argparse.Namespace) -> None:
    """One replica of --replicas: start, wait for "go", submit this replica's share, report
    the replies sent from here as they grow, and on "stop" its CPU, peak RSS and sessions."""
    index, count = args.replica_index, args.replicas
    model = contextlib.AsyncExitStack()
    if not args.llm_url:
        capacity = (args.llm_capacity or args.turns) // count
        args.llm_url = await model.enter_async_context(llm_at_pace(args.llm_delay, capacity))
    work = Path(args.work) / f"replica{index}"
    settings = settings_for(args, work, args.llm_url, args.redis_url, args.key_prefix)
    commands = await stdin_reader()
    async with model, running_gateway(settings) as gw:
        settle_collector()
        say({"ready": True})
        assert (await commands.readline()).strip() == b"go"
        cpu_before = cpu_seconds()
        mine = range(index, args.sessions, count)
        if args.one_intake:  # as with Telegram's long polling, where only the leader takes
            mine = range(args.sessions if index == 0 else 0)
        submissions = await asyncio.gather(
            *(gw.submit(f"hello {n}", chat_id=f"c{n}") for n in mine)
        )
        pending, _ = await gw.app.store.inbox_stats()
        refused = sum(s.status not in (Status.STARTED, Status.QUEUED) for s in submissions)
        say({"stored": True, "refused": refused, "waiting": pending})
        told, replies, seen = -1, 0, 0
        stop = asyncio.ensure_future(commands.readline())
        while not stop.done():
            sent = gw.console.sent
            replies += sum(map(is_answer, sent[seen:]))  # only what was sent since
            seen = len(sent)
            if replies != told:
                say({"answered": replies})
                told = replies
            await asyncio.sleep(0.02)
        cpu = cpu_seconds() - cpu_before
        answered = [out.chat.chat_id for out in gw.console.sent if is_answer(out)]
    say(
        {
            "cpu": cpu,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "sessions": answered,
        }
    )


def is_answer(out: Outbound) -> bool:
    return out.text.startswith("echo: ")  # as llm_at_pace and tests/fakes/llm.py answer


class Result(NamedTuple):
    stored: float
    drained: float
    refused: int
    answered: int
    duplicated: int
    cpu_per_message: float
    redis_cpu_per_message: float
    peak_mb: float
    queued_memory: int
    pending: int


def print_table(args: argparse.Namespace, result: Result) -> None:
    capacity = args.llm_capacity or args.turns
    per_message = result.queued_memory / result.pending if result.pending else float("nan")
    # The model's own bound: its capacity, or the turns that may call it at once.
    pace = math.ceil(args.sessions / min(capacity, args.turns)) * args.llm_delay
    print(
        "| sessions | replicas | all stored | all answered | LLM pace floor | refused | "
        "answered | duplicated | CPU per message | Redis CPU per message | peak RSS | "
        "Redis per waiting message |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {args.sessions} | {args.replicas} | {result.stored:.1f} s | "
        f"{result.drained:.1f} s | {pace:.1f} s | {result.refused} | {result.answered} | "
        f"{result.duplicated} | {result.cpu_per_message:.2f} ms | "
        f"{result.redis_cpu_per_message:.2f} ms | {result.peak_mb:.0f} MB | "
        f"{per_message:.0f} B ({result.pending} waiting) |"
    )


def forwarded(args: argparse.Namespace) -> list[str]:
    """The options a replica takes from the command line it was started from."""
    return [
        *("--sessions", str(args.sessions), "--llm-delay", str(args.llm_delay)),
        *("--turns", str(args.turns), "--llm-capacity", str(args.llm_capacity)),
        *("--pool", str(args.pool), "--loop", args.loop, "--replicas", str(args.replicas)),
        *(["--one-intake"] if args.one_intake else []),
    ]


async def read_line(process: asyncio.subprocess.Process) -> dict[str, Any]:
    assert process.stdout is not None
    line = await process.stdout.readline()
    if not line:
        raise RuntimeError(f"a replica exited (code {await process.wait()})")
    message: dict[str, Any] = json.loads(line)
    return message


def tell(process: asyncio.subprocess.Process, command: str) -> None:
    assert process.stdin is not None
    process.stdin.write(f"{command}\n".encode())


def say(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def stdin_reader() -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), sys.stdin
    )
    return reader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--llm-delay", type=float, default=0.2)
    parser.add_argument("--turns", type=int, default=256, help="turns at once, in all replicas")
    parser.add_argument(
        "--llm-capacity",
        type=int,
        default=0,
        help="requests the model serves at once (default: --turns); with more turns than "
        "this, turns wait for the model as they would for a busy model server",
    )
    parser.add_argument("--pool", type=int, default=16, help="Redis connections per replica")
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
    parser.add_argument(
        "--replicas", type=int, default=1, help="gateway processes sharing the burst"
    )
    parser.add_argument(
        "--one-intake",
        action="store_true",
        help="with --replicas: every message goes to the first replica and the others only "
        "claim waiting sessions from the store (as with Telegram's long polling)",
    )
    parser.add_argument(
        "--webhooks",
        action="store_true",
        help="send the burst as Telegram webhook calls into a `chatgate run` subprocess",
    )
    parser.add_argument("--store", choices=["redis", "embedded"], default="redis")
    parser.add_argument(
        "--connections",
        type=int,
        default=100,
        help="with --webhooks: calls in flight at once (Telegram's max_connections is 1..100; "
        "more stands for several bots or a balancer in front of many)",
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=1,
        help="with --webhooks: processes sending the calls, each a share of the chats and "
        "of the connections",
    )
    parser.add_argument(
        "--bare-server",
        action="store_true",
        help="with --webhooks: send the calls to a bare aiohttp server that only answers 200 "
        "(bench/bare_webhook_server.py), the acknowledgement's floor on this machine",
    )
    parser.add_argument(
        "--gateway-tree",
        default="",
        help="with --webhooks: run the gateway from this source tree (default: this checkout), "
        "to compare two versions on the same machine",
    )
    parser.add_argument(
        "--stall",
        type=float,
        default=60.0,
        help="with --webhooks: give up waiting for replies after this long without one",
    )
    # How run_replicas starts each replica; not for the command line.
    for internal in ("--replica-index", "--redis-url", "--key-prefix", "--llm-url", "--work"):
        parser.add_argument(internal, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.webhooks:
        event_loop_runner(args.loop)(webhook_burst.run(args))
    elif args.replica_index is not None:
        args.replica_index = int(args.replica_index)
        event_loop_runner(args.loop)(replica(args))
    elif args.replicas > 1:
        event_loop_runner(args.loop)(run_replicas(args))
    else:
        event_loop_runner(args.loop)(run(args))


if __name__ == "__main__":
    main()
