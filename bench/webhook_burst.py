"""The burst as real Telegram webhook calls into a `chatgate run` subprocess (burst.py --webhooks).

Each chat sends one message at once. The updates go over HTTP, with the secret header, to a
`chatgate run` on Redis or on the embedded store that answers through a fake Bot API in this
process, with the model in a process of its own, and are sent from client processes of their
own (webhook_calls.py, `--clients`). The client behaves like Telegram's delivery:
at most `--connections` calls in flight (Telegram's `max_connections`, 40 by default, up to
100), and a call not answered within 10 s is dropped and sent again, as is one answered with
anything but 200. Measured: each chat's reply counted at the fake Bot API (answered once,
duplicated, lost), how long each call waited for its answer (the acknowledgement: from the
moment the client started the call, not from when it queued for a connection; and from the
moment its request was written, which leaves out the client's own time starting the other
calls, with the connections the kernel dropped because the gateway's listen queue was full
counted beside it), how long each chat waited for its reply from its first call, the calls
that reached the 10 s timeout, and the gateway's CPU time per call from the first call to the
last answer.

With `--bare-server` the same calls go to bench/bare_webhook_server.py instead, an aiohttp
server that only reads each body and answers 200: the acknowledgement's floor on this
machine, to read the gateway's figure against.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.telegram import Call, FakeBotAPI
from tests.fixtures_redis import RedisServer
from tests.replicas import WEBHOOK_SECRET, base_env, start_replica

ROOT = Path(__file__).resolve().parent.parent
WEBHOOK_TIMEOUT = 10.0  # Telegram gives up on a webhook call after this long and sends it again
RETRY_PAUSE = 1.0  # before sending again a call answered with an error
SETTLE = 8.0  # after the last reply, how long to keep counting replies (a late second run)
ANSWER_FORMAT = re.compile(r"echo: hello (\d+)$")
# Counted in the gateway's log after the run: what it says about repeats and take-overs.
LOG_LINES = (
    "duplicate event dropped",
    "session lease expired while held",
    "session lease lost",
    "turn run again after its process stopped",
    "session taken over from a stuck run",
)


@dataclass
class Tally:
    """What the client and the fake Bot API saw, per chat and per call."""

    sent_at: dict[int, float] = field(default_factory=dict)  # chat -> its first call
    acked: list[float] = field(default_factory=list)  # each call answered 200: seconds
    acked_written: list[float] = field(default_factory=list)  # the same, from its write
    listen_overflows: int = 0  # connections the kernel dropped: the listen queue was full
    answered_at: dict[int, float] = field(default_factory=dict)  # chat -> its first reply
    replies: Counter[int] = field(default_factory=Counter)
    timed_out: int = 0
    refused: Counter[int] = field(default_factory=Counter)  # status -> calls
    failed: int = 0  # connection errors
    retried: int = 0  # updates sent again
    last_ack: float = 0.0
    ack_cpu: float = 0.0  # the gateway's CPU seconds from the first call to the last answer
    last_reply: float = 0.0

    def reply(self, call: Call) -> None:
        if call.method != "sendMessage" or call.status != 200:
            return
        match = ANSWER_FORMAT.match(call.text)
        if match is None:
            return
        chat = int(match.group(1))
        self.replies[chat] += 1
        self.answered_at.setdefault(chat, call.at)
        self.last_reply = call.at


def gateway_env(args: argparse.Namespace, tg: FakeBotAPI, llm_url: str, redis_url: str) -> Any:
    settings = {
        "CHATGATE_TELEGRAM__TOKEN": tg.token,
        "CHATGATE_TELEGRAM__API_URL": tg.url,
        "CHATGATE_TELEGRAM__MODE": "webhook",
        "CHATGATE_TELEGRAM__WEBHOOK_URL": "https://bot.example.org/telegram/webhook",
        "CHATGATE_TELEGRAM__WEBHOOK_SECRET": WEBHOOK_SECRET,
        "CHATGATE_LLM__BASE_URL": llm_url,
        "CHATGATE_LLM__MODEL": "fake-model",
        "CHATGATE_LLM__STREAM": "false",
        "CHATGATE_ROUTER__MAX_CONCURRENT_TURNS": str(args.turns),
        "CHATGATE_ROUTER__TYPING_DELAY": "30",
        "CHATGATE_ACCESS__RATE_LIMIT_PER_MINUTE": "0",
        "CHATGATE_SCHEDULER__ENABLED": "false",
        "CHATGATE_EVENT_LOOP": args.loop,
        "CHATGATE_LOG_LEVEL": "INFO",
        # The gateway of this checkout (or --gateway-tree), whatever the venv installed.
        "PYTHONPATH": str(Path(args.gateway_tree or ROOT).resolve()),
    }
    if redis_url:
        settings["CHATGATE_REDIS__URL"] = redis_url
        settings["CHATGATE_REDIS__KEY_PREFIX"] = f"whburst{uuid.uuid4().hex[:8]}"
        settings["CHATGATE_REDIS__MAX_CONNECTIONS"] = str(args.pool)
    return base_env(**settings)


@contextlib.asynccontextmanager
async def model_process(args: argparse.Namespace) -> AsyncIterator[str]:
    """The model as an HTTP server in its own process (tests/fakes/llm.py); its address."""
    model = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.fakes.llm", "--delay", str(args.llm_delay)),
        *("--capacity", str(args.llm_capacity or args.turns)),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert model.stdout is not None
    try:
        yield (await model.stdout.readline()).decode().strip()
    finally:
        model.terminate()
        await model.wait()


@contextlib.asynccontextmanager
async def redis_server(args: argparse.Namespace, work: Path) -> AsyncIterator[str]:
    """A private redis-server's URL, or "" for the embedded store."""
    if args.store == "embedded":
        yield ""
        return
    (work / "redis").mkdir()
    server = RedisServer(work / "redis")
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


@dataclass(frozen=True)
class Server:
    """Where the calls go, and the process whose CPU time is counted."""

    url: str
    pid: int


async def burst(args: argparse.Namespace, server: Server, tg: FakeBotAPI, tally: Tally) -> float:
    """Send every chat's message from client processes of their own (webhook_calls.py), each
    with a share of the chats and of the connections; returns when the burst started."""
    updates = [
        (n, json.dumps({"update_id": n + 1, "message": tg.message(f"hello {n}", chat_id=n + 1)}))
        for n in range(args.sessions)
    ]
    clients = [
        await start_client(args, server.url, updates[index :: args.clients], index)
        for index in range(args.clients)
    ]
    cpu_before = process_cpu(server.pid)
    overflows_before = listen_overflows()
    starts = await asyncio.gather(*(read_client(client, tally) for client in clients))
    tally.ack_cpu = process_cpu(server.pid) - cpu_before
    tally.listen_overflows = listen_overflows() - overflows_before
    return min(starts)


async def start_client(
    args: argparse.Namespace, url: str, updates: list[tuple[int, str]], index: int
) -> asyncio.subprocess.Process:
    job = {
        "url": f"{url}/telegram/webhook",
        "secret": WEBHOOK_SECRET,
        "connections": args.connections // args.clients + (index < args.connections % args.clients),
        "timeout": WEBHOOK_TIMEOUT,
        "retry_pause": RETRY_PAUSE,
        "loop": args.loop,
        "updates": updates,
    }
    client = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bench.webhook_calls"),
        cwd=ROOT,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert client.stdin is not None
    client.stdin.write(json.dumps(job).encode())
    await client.stdin.drain()
    client.stdin.close()
    return client


async def read_client(client: asyncio.subprocess.Process, tally: Tally) -> float:
    """Count what one client process reports; when its first call went out."""
    assert client.stdout is not None
    started = time.monotonic()
    async for raw in client.stdout:
        line = json.loads(raw)
        if "started" in line:
            started = line["started"]
        elif "chat" in line:
            tally.sent_at[line["chat"]] = line["sent"]
            tally.acked.append(line["ack"])
            tally.acked_written.append(line["ack_written"])
            tally.last_ack = max(tally.last_ack, line["at"])
        elif line.get("done"):
            tally.timed_out += line["timed_out"]
            tally.failed += line["failed"]
            tally.refused.update({int(k): v for k, v in line["refused"].items()})
            tally.retried += line["retried"]
    await client.wait()
    return float(started)


def listen_overflows() -> int:
    """The kernel's count of connections dropped because a listen queue was full (all
    processes): such a caller's connect waits a second or more before it is tried again."""
    names, values = [
        line.split() for line in Path("/proc/net/netstat").read_text().splitlines()[:2]
    ]
    return int(dict(zip(names, values, strict=True))["ListenOverflows"])


def process_cpu(pid: int) -> float:
    """A process's CPU seconds so far (user and system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def wait_answers(args: argparse.Namespace, tally: Tally) -> None:
    """Until every chat is answered, or no reply came for `--stall` seconds; then a while
    longer, so that a second reply from a run taken over late is counted too."""
    last_count, last_change = -1, time.monotonic()
    while len(tally.replies) < args.sessions:
        if len(tally.replies) != last_count:
            last_count, last_change = len(tally.replies), time.monotonic()
        elif time.monotonic() - last_change > args.stall:
            break
        await asyncio.sleep(0.2)
    await asyncio.sleep(SETTLE)


async def run(args: argparse.Namespace) -> None:
    if args.bare_server:
        await run_bare(args)
        return
    work = Path(tempfile.mkdtemp(prefix="chatgate-webhook-burst-"))
    tally = Tally()
    async with (
        redis_server(args, work) as redis_url,
        model_process(args) as llm_url,
        FakeBotAPI() as tg,
    ):
        tg.listeners.append(tally.reply)
        replica = await start_replica("gateway", work, gateway_env(args, tg, llm_url, redis_url))
        try:
            started = await burst(args, Server(replica.url, replica.proc.pid), tg, tally)
            await wait_answers(args, tally)
        finally:
            await replica.stop()
        log = replica.log.read_text(errors="replace")
    print_table(args, tally, started, log)


async def run_bare(args: argparse.Namespace) -> None:
    """The calls against bench/bare_webhook_server.py: only the acknowledgement is measured."""
    tally = Tally()
    server = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bench.bare_webhook_server", args.loop),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
    )
    assert server.stdout is not None
    try:
        port = int(await server.stdout.readline())
        async with FakeBotAPI() as tg:  # only its update shapes: nothing answers here
            started = await burst(args, Server(f"http://127.0.0.1:{port}", server.pid), tg, tally)
    finally:
        server.terminate()
        await server.wait()
    print(
        "| server | calls | connections | ack p50 | ack p99 | ack p50 / p99 from the request's "
        "write | connections dropped (listen queue full) | POSTs timed out (10 s) | all acked "
        "| server CPU per call till acked |"
    )
    print("|---" * 10 + "|")
    print(
        f"| bare aiohttp | {args.sessions} | {args.connections} | "
        f"{percentile(tally.acked, 0.5):.2f} s | {percentile(tally.acked, 0.99):.2f} s | "
        f"{percentile(tally.acked_written, 0.5):.2f} / "
        f"{percentile(tally.acked_written, 0.99):.2f} s | {tally.listen_overflows} | "
        f"{tally.timed_out} | {tally.last_ack - started:.1f} s | "
        f"{tally.ack_cpu / args.sessions * 1e6:.0f} µs |"
    )


def percentile(values: list[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(int(share * len(ordered)), len(ordered) - 1)]


def print_table(args: argparse.Namespace, tally: Tally, started: float, log: str) -> None:
    waits = [tally.answered_at[c] - tally.sent_at[c] for c in tally.answered_at]
    once = sum(1 for n in tally.replies.values() if n == 1)
    duplicated = sum(1 for n in tally.replies.values() if n > 1)
    lost = args.sessions - len(tally.replies)
    print(
        "| store | chats | connections | answered once | duplicated | lost | ack p50 | "
        "ack p99 | ack max | ack p50 / p99 from the request's write | connections dropped "
        "(listen queue full) | answer p50 | answer p99 | POSTs timed out (10 s) | "
        "updates sent again | all acked | all answered | gateway CPU per call till acked |"
    )
    print("|---" * 18 + "|")
    print(
        f"| {args.store} | {args.sessions} | {args.connections} | {once} | {duplicated} | "
        f"{lost} | {percentile(tally.acked, 0.5):.2f} s | {percentile(tally.acked, 0.99):.2f} s "
        f"| {max(tally.acked, default=float('nan')):.2f} s | "
        f"{percentile(tally.acked_written, 0.5):.2f} / "
        f"{percentile(tally.acked_written, 0.99):.2f} s "
        f"| {tally.listen_overflows} | {percentile(waits, 0.5):.1f} s | "
        f"{percentile(waits, 0.99):.1f} s | {tally.timed_out} | {tally.retried} | "
        f"{tally.last_ack - started:.1f} s | {tally.last_reply - started:.1f} s | "
        f"{tally.ack_cpu / args.sessions * 1e6:.0f} µs |"
    )
    refused = ", ".join(f"{status or 'no connection'}: {n}" for status, n in tally.refused.items())
    if refused:
        print(f"calls answered with an error: {refused}")
    counts = ", ".join(f'"{line}": {log.count(line)}' for line in LOG_LINES if line in log)
    print(f"gateway log: {counts or 'no repeats or take-overs'}")
